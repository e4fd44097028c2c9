"""The whole-clip predict count of sizing.flops (every window predict_clips runs) against torch's
FlopCounterMode on a tiny real GROVE (models.grove.configuration.tiny_configs)."""
import core  # noqa: F401

from dataclasses import replace

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from formats.records import strip_tags, tagged_phrases
from formats.video_files import open_video
from formats.video_writer import write_video
from models.grove import Grove
from models.grove.clip_processing import GroundedCollate
from models.grove.configuration import tiny_configs
from models.grove.processing import GroveProcessor, clip_record, predict_clips
from models.tiny_tokenizer import build_tiny_tokenizer
from sizing.flops import grove_clip_flops, predict_windows

SETTINGS = {"num_frames": 8, "global_image_size": 64, "global_resize": "squash", "grounding_image_size": 128,
            "grounding_resize": "float"}
TAGGED = "a <p> dog </p> [DET] chases <p> a ball </p> [DET] on the grass"
# a 5 % margin: the counter does not see open_clip's attention scores (about 3 % of the global tower),
# and the LLM's attention kernel and generation's first logits differ from the analytic causal count
TOLERANCE = 0.05


def _tiny_sizes(model, vocab: int) -> dict:
    return {"clip": {"image_size": 64, "patch": 16, "width": 64, "blocks": model.global_encoder.num_blocks,
                     "adapters": len(model.global_encoder.adapters), "llm_dim": 128},
            "sam": {"image_size": 128, "patch": 16, "width": 64, "depth": 4, "num_heads": 4, "global_blocks": 2,
                    "window": 4, "out_chans": 64},
            "llama": {"hidden": 128, "intermediate": 256, "layers": 2, "vocab": vocab},
            "box": {"image_tokens": 64, "dim": 64, "depth": 2, "mlp_dim": 128, "llm_dim": 128}}


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    torch.manual_seed(0)
    tmp = tmp_path_factory.mktemp("clip_flops")
    model = Grove(**tiny_configs(), tokenizer=build_tiny_tokenizer(tmp / "tok")).eval()
    # in eval mode nn.MultiheadAttention takes a fused path the counter cannot see at all; the tiny
    # tower has no dropout, so train mode computes the same tokens with its products visible
    model.global_encoder.train()
    video = write_video(tmp / "clip.mp4", np.random.default_rng(0).integers(0, 256, (80, 48, 64, 3), np.uint8), 25)
    record = clip_record(video, 0, 79)
    record = replace(record, tagged_caption=TAGGED, caption=strip_tags(TAGGED), phrases=tagged_phrases(TAGGED))
    with open_video("/", record.video_fname) as source:
        frames = source.read_frames(record.frame_indices.tolist())
    batch = GroundedCollate(model.prompter)([GroveProcessor(preprocessing=SETTINGS).sample(frames, record)])
    return model, batch


def _counted(fn) -> int:
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def test_every_window_is_counted():
    assert predict_windows(40) == 5 and predict_windows(16) == 2 and predict_windows(3) == 1
    assert predict_windows(40, window_mode="official") == 5 and predict_windows(43, window_mode="official") == 8
    whole, one = grove_clip_flops(), grove_clip_flops(grid_frames=8)
    # the third of the 5 interleaved windows shows the caption's frames: its global tower runs once
    assert whole.num_windows == 5 and whole.reused_windows == 1
    assert whole.total == whole.caption + 5 * whole.per_window.total - whole.per_window.global_tower
    assert one.reused_windows == 1 and whole.total - one.total == 4 * one.per_window.total
    contiguous = grove_clip_flops(window_mode="contiguous")  # no window is the segment centres
    assert contiguous.reused_windows == 0 and contiguous.total == contiguous.caption + 5 * contiguous.per_window.total
    assert grove_clip_flops(window_mode="official").reused_windows == 1  # it captions from one of its windows


def test_the_tiny_predict_path_agrees_with_the_counter(clip):
    model, batch = clip
    grid = int(batch["frame_mask"].sum())
    video_tokens = 16  # the tiny global tower pools to 4 x 2 x 2
    # the windows: teacher-forced predict_clips grounds the caption on all 16 grid frames (2 windows),
    # each with its own global tower (no caption was generated whose video tokens a window could reuse)
    counted_windows = _counted(lambda: predict_clips(model, batch, 0.0, teacher_forced=True))
    ground_ids = model.prompter.encode_training([TAGGED])["input_ids"].shape[1]
    prompt_ids = model.prompter.encode_prompts(1)["input_ids"].shape[1]
    # the caption: generate_captions on the caption frames, prompt pass and greedy steps
    caption_frames = batch["global_frames"][:, batch["caption_positions"][0]]
    generated = []

    def caption():
        generated.extend(model.generate_captions(caption_frames, max_new_tokens=6))

    counted_caption = _counted(caption)
    new_tokens = len(model.tokenizer(generated[0], add_special_tokens=False)["input_ids"]) + 1  # with the EOS step
    new_tokens = min(new_tokens, 6)
    sizes = _tiny_sizes(model, len(model.tokenizer))
    windows = grove_clip_flops(grid, prompt_text_tokens=prompt_ids - video_tokens, video_tokens=video_tokens,
                               new_tokens=ground_ids - prompt_ids, phrases=2, sizes=sizes)
    captioning = grove_clip_flops(grid, prompt_text_tokens=prompt_ids - video_tokens, video_tokens=video_tokens,
                                  new_tokens=new_tokens, sizes=sizes)
    assert windows.num_windows == 2 and windows.reused_windows == 1
    every_tower = windows.windows + windows.reused_windows * windows.per_window.global_tower
    assert abs(every_tower - counted_windows) <= TOLERANCE * counted_windows, (every_tower, counted_windows)
    assert abs(captioning.caption - counted_caption) <= TOLERANCE * counted_caption, (captioning.caption,
                                                                                     counted_caption)
    # the whole path is 2 windows and a caption: more than twice what one 8-frame window costs
    total = counted_windows + counted_caption
    assert abs(every_tower + captioning.caption - total) <= TOLERANCE * total
    assert total > 2.05 * windows.per_window.total
