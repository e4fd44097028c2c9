"""JudgePrompter: frames + caption (+ answer) -> Qwen2.5-VL inputs, batched for training and generation."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor

from judge.model.prompt_format import IGNORE_INDEX, JUDGE_INSTRUCTION, SYSTEM_PROMPT, TEMPLATES, VIDEO_TOKEN
from judge.model.video_feature_cache import pixel_digest


class JudgePrompter:
    """Frames + caption (+ answer) -> Qwen2.5-VL inputs; picklable (tokenizer, processor, numbers).

    ``max_pixels`` bounds each frame (224 x 224 in the paper); frames keep their aspect ratio and
    are resized to multiples of ``patch_size * merge_size``. ``digest_videos`` adds each clip's
    pixel digest to its sample (``video_digest``), the key of the judge's frozen-tower memo.
    """

    def __init__(self, tokenizer, video_processor, template: str = "qwen", max_pixels: int = 224 * 224,
                 min_pixels: int = 56 * 56, digest_videos: bool = False):
        if template not in TEMPLATES:
            raise ValueError(f"template must be one of {TEMPLATES}, got {template!r}")
        missing = [t for t in ("<|vision_start|>", "<|vision_end|>", VIDEO_TOKEN, "<|im_end|>")
                   if tokenizer.convert_tokens_to_ids(t) in (None, tokenizer.unk_token_id)]
        if missing:
            raise ValueError(f"the judge tokenizer lacks Qwen's special token(s) {missing}")
        self.tokenizer = tokenizer
        self.video_processor = video_processor
        self.template = template
        self.max_pixels, self.min_pixels = int(max_pixels), int(min_pixels)
        self.digest_videos = bool(digest_videos)  # add each clip's pixel digest, the frozen-tower memo's key
        self.video_token_id = tokenizer.convert_tokens_to_ids(VIDEO_TOKEN)
        self.end_token = "<|im_end|>" if template == "qwen" else tokenizer.eos_token
        self.end_token_id = tokenizer.convert_tokens_to_ids(self.end_token)
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.end_token_id
        self.temporal_patch_size = int(video_processor.temporal_patch_size)

    def prompt_text(self, caption: str, num_video_tokens: int, instruction: str | None = None) -> str:
        """Prompt D.6 with the caption (or another ``instruction`` about the video), in the chosen chat template."""
        video = f"<|vision_start|>{VIDEO_TOKEN * num_video_tokens}<|vision_end|>"
        if instruction is None:
            instruction = JUDGE_INSTRUCTION.format(caption=caption)
        if self.template == "qwen":
            return (f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n{video}{instruction}"
                    "<|im_end|>\n<|im_start|>assistant\n")
        return f"USER:\n{video}\n\n{instruction}\nASSISTANT:\n"

    def encode_video(self, frames: np.ndarray | Tensor) -> tuple[Tensor, Tensor]:
        """``(T, H, W, 3)`` uint8 frames -> ``pixel_values_videos (N, D)`` and ``video_grid_thw (3,)``."""
        frames = frames.cpu().numpy() if isinstance(frames, Tensor) else np.asarray(frames)
        if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
            raise ValueError(f"expected uint8 frames of shape (T, H, W, 3), got {frames.shape} {frames.dtype}")
        out = self.video_processor(videos=[frames], do_sample_frames=False, return_tensors="pt",
                                   size={"shortest_edge": self.min_pixels, "longest_edge": self.max_pixels},
                                   cap_pixels_per_frame=False)
        return out["pixel_values_videos"], out["video_grid_thw"][0]

    def num_video_tokens(self, grid_thw: Tensor) -> int:
        return int(grid_thw.prod()) // int(self.video_processor.merge_size) ** 2

    def encode(self, frames: np.ndarray | Tensor, caption: str, answer: str | None = None,
               sampled_fps: float | None = None, error_spans: Sequence[tuple[int, int]] | None = None,
               instruction: str | None = None) -> dict[str, Any]:
        """One sample: prompt ids, answer ids (loss only there) and the video's patches.

        ``instruction`` replaces the judge prompt (a captioner's request; then ``caption`` is unused).
        ``error_spans`` (character spans of
        ``caption`` that are wrong, ``[]`` for a correct caption) adds ``error_labels``: per prompt
        token 1 inside a span, 0 elsewhere in the caption, -100 outside it."""
        if error_spans is not None and instruction is not None:
            raise ValueError("error_spans label the caption of the judge prompt; an instruction prompt has none")
        pixels, grid = self.encode_video(frames)
        text = self.prompt_text(caption, self.num_video_tokens(grid), instruction)
        encoded = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=error_spans is not None)
        prompt = encoded["input_ids"]
        sample = {"prompt_ids": torch.tensor(prompt, dtype=torch.long), "pixel_values_videos": pixels,
                  "video_grid_thw": grid,
                  # seconds per temporal patch: M-RoPE spaces video time positions by it
                  "second_per_grid_ts": float(self.temporal_patch_size / sampled_fps) if sampled_fps else 1.0}
        if self.digest_videos:  # hashed here, in the loader workers, not in the training step
            sample["video_digest"] = pixel_digest(pixels)
        if answer is not None:
            ids = self.tokenizer(answer + self.end_token, add_special_tokens=False)["input_ids"]
            sample["answer_ids"] = torch.tensor(ids, dtype=torch.long)
        if error_spans is not None:
            sample["error_labels"] = self.error_labels(text, caption, encoded["offset_mapping"], error_spans)
        return sample

    @staticmethod
    def error_labels(text: str, caption: str, offsets: Sequence[tuple[int, int]],
                     error_spans: Sequence[tuple[int, int]]) -> Tensor:
        """Per-token labels of the caption in ``text``: 1 on a token overlapping a wrong span, else 0; -100 off it."""
        marked = f"<caption>{caption}</caption>"
        at = text.find(marked)
        if at < 0:
            raise ValueError("the prompt does not hold the caption between <caption> tags")
        begin = at + len("<caption>")
        bounds = torch.tensor(offsets, dtype=torch.long).view(-1, 2)
        spans = torch.tensor([(begin + a, begin + b) for a, b in error_spans], dtype=torch.long).view(-1, 2)
        if len(spans) and (bool((spans[:, 0] >= spans[:, 1]).any()) or int(spans.max()) > begin + len(caption)
                           or int(spans.min()) < begin):
            raise ValueError(f"error spans {list(error_spans)} do not lie inside the caption ({len(caption)} chars)")

        def overlaps(lo: Tensor, hi: Tensor) -> Tensor:  # tokens (N,) x ranges (M,) -> (N,)
            hits = (bounds[:, :1] < hi.view(1, -1)) & (bounds[:, 1:] > lo.view(1, -1))
            return hits.any(dim=1)

        labels = torch.full((len(bounds),), IGNORE_INDEX, dtype=torch.long)
        labels[overlaps(torch.tensor([begin]), torch.tensor([begin + len(caption)]))] = 0
        if len(spans):
            labels[overlaps(spans[:, 0], spans[:, 1])] = 1
        return labels

    def collate(self, samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Right-padded prompt+answer (training) and left-padded prompts (generation); tensors, and
        ``video_digests`` (a list of str: the clips' keys for the frozen-tower memo)."""
        out: dict[str, Any] = {
            "pixel_values_videos": torch.cat([s["pixel_values_videos"] for s in samples]),
            "video_grid_thw": torch.stack([s["video_grid_thw"] for s in samples]),
            "second_per_grid_ts": torch.tensor([s["second_per_grid_ts"] for s in samples], dtype=torch.float32),
        }
        if all("video_digest" in s for s in samples):
            out["video_digests"] = [s["video_digest"] for s in samples]
        prompts = [s["prompt_ids"] for s in samples]
        width = max(len(p) for p in prompts)
        ids = torch.full((len(samples), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(samples), width), dtype=torch.long)
        for i, p in enumerate(prompts):  # left padding: generation appends on the right
            ids[i, width - len(p):] = p
            mask[i, width - len(p):] = 1
        out.update(prompt_ids=ids, prompt_attention_mask=mask, prompt_mm_token_type_ids=self.token_types(ids))
        if all("answer_ids" in s for s in samples):
            full = [torch.cat([s["prompt_ids"], s["answer_ids"]]) for s in samples]
            width = max(len(f) for f in full)
            ids = torch.full((len(samples), width), self.pad_token_id, dtype=torch.long)
            labels = torch.full((len(samples), width), IGNORE_INDEX, dtype=torch.long)
            mask = torch.zeros((len(samples), width), dtype=torch.long)
            for i, (f, s) in enumerate(zip(full, samples)):
                ids[i, :len(f)] = f
                mask[i, :len(f)] = 1
                labels[i, len(s["prompt_ids"]):len(f)] = s["answer_ids"]  # loss on the answer tokens only
            out.update(input_ids=ids, attention_mask=mask, labels=labels, mm_token_type_ids=self.token_types(ids))
            if any("error_labels" in s for s in samples):  # aligned with input_ids; -100 where a sample has none
                errors = torch.full((len(samples), width), IGNORE_INDEX, dtype=torch.long)
                for i, s in enumerate(samples):
                    if "error_labels" in s:
                        errors[i, :len(s["error_labels"])] = s["error_labels"]
                out["error_labels"] = errors
        return out

    def token_types(self, ids: Tensor) -> Tensor:
        """Qwen2.5-VL's modality ids (0 text, 2 video) that drive its 3-D rotary positions."""
        return (ids == self.video_token_id).to(torch.int32) * 2

    def decode(self, ids: Tensor) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)
