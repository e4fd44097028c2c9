"""The toy judge's vision stage: a dense word-and-motion pretext for its Qwen2.5-VL vision tower.

A real VC-Inspector starts from Qwen2.5-VL, whose vision tower is pre-trained; the toy judge of
configs/judge_demo.yaml is random, and a random tower trained only through the judge's answer
loss never shows the language model what is in the clip. This stage stands in for that
pre-training with the phrase-word pretext of :mod:`models.patch_pretext`: every merged video
token (2 x 2 patches of 2 frames) predicts the words of the phrases whose boxes cover it in
either frame and how those objects move between its two frames (left/right/up/down/still/
appears/disappears: the parts of the captions' actions), on grounded synthetic training clips.
"""
from __future__ import annotations

import json
import time

import numpy as np
import torch

from models.grove.image_processing import CLIP_MEAN, CLIP_STD
from models.patch_pretext import (
    MOTION_WORDS,
    PatchWordHead,
    build_word_vocabulary,
    patch_word_targets,
    phrase_word_matrix,
    pretext_optimizer,
    slice_motion_words,
)

VISION_FILE = "qwen_vision.bin"


def to_uint8(frames: torch.Tensor) -> np.ndarray:
    """CLIP-normalised ``(B, T, 3, H, W)`` -> uint8 ``(B, T, H, W, 3)``, what the judge's processor reads."""
    mean = torch.tensor(CLIP_MEAN).view(1, 1, 3, 1, 1) * 255.0
    std = torch.tensor(CLIP_STD).view(1, 1, 3, 1, 1) * 255.0
    pixels = (frames.float() * std + mean).round().clamp(0, 255).to(torch.uint8)
    return pixels.permute(0, 1, 3, 4, 2).numpy()


def merged_token_targets(batch: dict, words: torch.Tensor, grid_thw: torch.Tensor, temporal_patch: int,
                         merge: int, min_overlap: float = 0.5) -> torch.Tensor:
    """Word targets of every merged token, in the vision tower's output order: ``(sum_i t*h*w, V)``.

    ``grid_thw (B, 3)`` is the patch grid of each clip (all equal: one frame size per batch); a
    merged token covers ``merge x merge`` patches of ``temporal_patch`` frames and takes the words
    of every object sharing at least ``min_overlap`` of the smaller one's area with it in any of
    them; ``len(MOTION_WORDS)`` more targets follow the ``V`` words: what each object over the token
    does within the token's frames (``slice_motion_words``), so that the tokens carry the motion
    actions are made of.
    """
    if not bool((grid_thw == grid_thw[0]).all()):
        raise ValueError(f"clips of one batch must share a patch grid, got {grid_thw.tolist()}")
    t, h, w = (int(v) for v in grid_thw[0])
    boxes = batch["boxes"].float()
    b, num_frames, slots = boxes.shape[:3]
    if num_frames != t * temporal_patch:
        raise ValueError(f"{num_frames} frames do not make {t} temporal patches of {temporal_patch}")
    # which objects cover each token, one target per object, over the token's frames: (B, t, h, w, P)
    each_object = torch.eye(slots).expand(b, slots, slots)
    covering = patch_word_targets(boxes, batch["present"], each_object, (h // merge, w // merge),
                                  min_overlap=min_overlap)
    covering = covering.view(b, t, temporal_patch, h // merge, w // merge, slots).amax(dim=2)
    targets = torch.einsum("bthwp,bpv->bthwv", covering, words.to(covering.dtype))
    moves = slice_motion_words(boxes, batch["present"], temporal_patch)  # (B, t, P, M)
    targets = torch.cat([targets, torch.einsum("bthwp,btpm->bthwm", covering, moves)], dim=-1)
    targets = (targets > 0).to(covering.dtype)
    return targets.reshape(-1, targets.shape[-1])


def pretrain(judge, datamodule, steps: int, lr: float, log_every: int = 25, log=print,
             min_overlap: float = 0.5) -> dict:
    """Train ``judge``'s vision tower and merger for ``steps`` batches of ``datamodule``'s grounded
    training clips; returns the stage's report (settings, seconds, final loss and word F1)."""
    tower = judge.vision_tower()
    prompter = judge.prompter
    temporal_patch = int(prompter.video_processor.temporal_patch_size)
    merge = int(prompter.video_processor.merge_size)
    train = datamodule.datasets["train"]
    vocabulary = build_word_vocabulary(p for record in train.records for p in record.phrases)
    targets_named = vocabulary + [f"motion:{w}" for w in MOTION_WORDS]
    head = PatchWordHead(int(tower.merger.mlp[-1].out_features), len(targets_named))
    params = [*tower.parameters(), *head.parameters()]
    optimizer, schedule = pretext_optimizer(params, lr, steps)
    start, step, window, last = time.perf_counter(), 0, {}, {}
    tower.train()
    while step < steps:
        for batch in datamodule.train_dataloader():
            if not batch["keys"]:
                continue
            clips = [prompter.encode_video(frames) for frames in to_uint8(batch["global_frames"])]
            pixels = torch.cat([c[0] for c in clips])
            grid = torch.stack([c[1] for c in clips])
            tokens = tower(pixels, grid_thw=grid).pooler_output
            words = phrase_word_matrix(batch["phrases"], vocabulary, batch["boxes"].shape[2])
            targets = merged_token_targets(batch, words, grid, temporal_patch, merge, min_overlap)
            loss, stats = head.loss(head(tokens), targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            schedule.step()
            step += 1
            window.setdefault("loss", []).append(loss.item())
            window.setdefault("word_f1", []).append(stats["word_f1"].item())
            if step % log_every == 0 or step == steps:
                last = {k: round(sum(v) / len(v), 4) for k, v in window.items()}
                log(json.dumps({"step": step, "seconds": round(time.perf_counter() - start, 1), **last}))
                window = {}
            if step >= steps:
                break
    tower.eval()
    return {"steps": steps, "lr": lr, "min_overlap": min_overlap, "motion": True, "vocabulary": targets_named,
            "seconds": round(time.perf_counter() - start, 1), "final": last}
