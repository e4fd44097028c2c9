"""Shared helpers of the judge tests: the tiny judge's sizes, random frames, a template explanation."""
import numpy as np

TINY = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64,
        "vision_hidden_size": 32, "vision_depth": 1, "vision_heads": 2}
EXPLANATION = ("The caption does not accurately capture the video content. For example, the objects "
               "(blue circle) are incorrect.")


def random_frames(seed, t=4, size=64):
    """``(t, size, size, 3)`` uint8 noise frames."""
    return np.random.default_rng(seed).integers(0, 256, (t, size, size, 3), dtype=np.uint8)


class ScriptedJudge:
    """A stand-in judge whose answers are a function of the caption; records every call."""

    def __init__(self, answer_of):
        self.answer_of = answer_of
        self.calls = []

    def score(self, frames, captions, max_new_tokens=64, sampled_fps=None):
        from judge.model.prompt_format import parse_judge_answer

        self.calls.append(list(captions))
        assert all(f.ndim == 4 and f.shape[-1] == 3 and f.dtype == np.uint8 for f in frames)
        return [parse_judge_answer(self.answer_of(c)) for c in captions]


def save_tiny_qwen_folder(folder, seed=0):
    """A randomly initialised tiny Qwen2.5-VL saved as a Hugging Face folder (model, tokenizer, video
    processor), as a released model is; returns the in-memory model it was saved from."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    from judge.model.tokenizer import build_tiny_judge_tokenizer
    from judge.model.vc_inspector import tiny_judge_config, tiny_video_processor

    tokenizer = build_tiny_judge_tokenizer()
    config = tiny_judge_config(tokenizer, **TINY)
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    vc = config.vision_config
    tiny_video_processor(vc.patch_size, vc.temporal_patch_size, vc.spatial_merge_size).save_pretrained(str(folder))
    return model
