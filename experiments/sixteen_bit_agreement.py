"""How far do GROVE's predictions move when every weight is bf16 or fp16 instead of fp32?

For each seed, a tiny GROVE whose LLM is first fitted to one tagged caption (a random LLM's
next-token logits are nearly tied, so any rounding flips its greedy choice and says nothing about a
trained model) predicts one random 8-frame clip in fp32, then as a bf16 and an fp16 copy
(``.to(dtype)``: the fp32 islands of docs/precision.md stay fp32). Printed per dtype: how many
captions are equal, and the largest difference of a box coordinate (normalised to the frame) and of
an objectness probability. docs/precision.md's tolerances, and the tests that hold them
(tests/models/grove/test_true_16bit.py), come from this.

``python -m experiments.sixteen_bit_agreement --seeds 20``
"""
from __future__ import annotations

import core  # noqa: F401
from core.cli_args import positive_int
from core.command_parser import CommandParser

import torch

from models.grove import Grove
from models.grove.configuration import tiny_configs

CAPTION = "a <p> red shape </p> [DET] near <p> a wall </p> [DET]"
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def seeded_clip(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random global (64 px) and grounding (128 px) frames of one 8-frame clip."""
    gen = torch.Generator().manual_seed(100 + seed)
    return torch.randn(1, 8, 3, 64, 64, generator=gen), torch.randn(1, 8, 3, 128, 128, generator=gen)


def fitted_tiny_grove(seed: int, steps: int = 80) -> Grove:
    """A seeded tiny GROVE whose LLM has been fitted to :data:`CAPTION` on the seed's clip (Adam, under a second)."""
    torch.manual_seed(seed)
    model = Grove(**tiny_configs())
    model.prompter = model.make_prompter(sample_question=False, template="plain")
    global_frames, _ = seeded_clip(seed)
    enc = model.prompter.encode_training([CAPTION])
    video = model.encode_video(global_frames[:, :4]).detach()
    optimizer = torch.optim.Adam(model.language_model.parameters(), lr=3e-3)
    for _ in range(steps):
        loss, _ = model.language_model(enc["input_ids"], enc["attention_mask"], video, enc["labels"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def cast_copy(model: Grove, dtype: torch.dtype) -> Grove:
    """``model``'s weights in a fresh GROVE cast to ``dtype``."""
    copy = Grove(**tiny_configs())
    copy.load_state_dict(model.state_dict())
    copy.prompter = model.prompter
    return copy.to(dtype).eval()


def predict(model: Grove, seed: int, dtype: torch.dtype = torch.float32):
    """The seed's clip predicted in windows of 4 frames, the caption generated (24 tokens at most)."""
    global_frames, grounding_frames = seeded_clip(seed)
    return model.predict(global_frames.to(dtype), grounding_frames.to(dtype), torch.ones(1, 8, dtype=torch.bool),
                         window=4, caption_positions=torch.arange(4).unsqueeze(0) * 2, max_new_tokens=24)


def agreement(seeds: int) -> dict[str, dict[str, float]]:
    """Per 16-bit dtype: equal captions (count), largest box and objectness differences over ``seeds`` seeds."""
    out = {name: {"captions_equal": 0, "box": 0.0, "objectness": 0.0} for name in DTYPES}
    for seed in range(seeds):
        model = fitted_tiny_grove(seed)
        reference = predict(model, seed)
        for name, dtype in DTYPES.items():
            half = predict(cast_copy(model, dtype), seed, dtype)
            row = out[name]
            row["captions_equal"] += int(half.tagged_captions == reference.tagged_captions)
            row["box"] = max(row["box"], float((half.boxes - reference.boxes).abs().max()))
            row["objectness"] = max(row["objectness"], float((half.scores - reference.scores).abs().max()))
    return out


def main(argv=None) -> None:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=positive_int, default=20)
    args = parser.parse_args(argv)
    for name, row in agreement(args.seeds).items():
        print(f"{name}: captions equal {row['captions_equal']}/{args.seeds}, largest box difference "
              f"{row['box']:.5f} of the frame, largest objectness difference {row['objectness']:.5f}")


if __name__ == "__main__":
    main()
