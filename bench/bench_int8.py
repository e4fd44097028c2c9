"""Weight-only int8 GROVE (models.grove.quantization): weight bytes, agreement with fp32 and predict time
at the tiny size, and the weight bytes of the released model at its real size.

    PYTHONPATH=. python bench/bench_int8.py [--seeds 5] [--repeats 3] [--config configs/official/grove.yaml]

Tiny size: ``tiny_configs()`` with std-0.1 LLaMA weights (as configs/demo.yaml trains; random weights,
no checkpoint), one 4-frame clip per seed. Agreement: greedy captions of 12 tokens (how many are
identical; the tokens before the first step where int8's logit changes could reorder fp32's top token
must be identical), boxes and objectness on a fixed tagged caption (largest differences). Time:
``Grove.predict`` on one clip, median of ``--repeats`` runs, on the CPU threads torch is given.

Real size: the config's model built on the meta device (sizing.memory_estimator.
build_meta_module; no memory, no weights); bytes from the parameter and buffer shapes, the int8 figure
by :func:`models.grove.quantization.quantized_weight_bytes` (each quantised (N, K) weight holds
``N*K + 5*N`` bytes).
"""
from __future__ import annotations

import core  # noqa: F401

import argparse
import copy
import statistics
import time
from dataclasses import replace
from pathlib import Path

import torch

from models.grove import Grove
from models.grove.configuration import read_stacked_yaml, tiny_configs
from models.grove.quantization import (
    quantizable_linears,
    quantize_weights,
    quantized_weight_bytes,
    weight_bytes,
)

ROOT = Path(__file__).resolve().parent.parent
CAPTION = ["a <p> red shape </p> [DET] near <p> a blue circle </p> [DET] and <p> a wall </p> [DET]"]
NEW_TOKENS = 12


def tiny(seed: int) -> Grove:
    torch.manual_seed(seed)
    configs = tiny_configs()
    lm = configs["language_model"]
    configs["language_model"] = replace(lm, llama_config={**lm.llama_config, "initializer_range": 0.1})
    model = Grove(**configs).eval()
    model.prompter = model.make_prompter(sample_question=False, template="plain")
    return model


def clip(seed: int):
    gen = torch.Generator().manual_seed(100 + seed)
    return (torch.randn(1, 4, 3, 64, 64, generator=gen), torch.randn(1, 4, 3, 128, 128, generator=gen),
            torch.ones(1, 4, dtype=torch.bool))


def caption_agreement(fp32: Grove, int8: Grove, frames: torch.Tensor) -> tuple[bool, int, int]:
    """(captions identical, tokens decided before the first undecided step, tokens equal among them)."""
    prompts = fp32.prompter.encode_prompts(1)
    video = {m: m.encode_video(frames) for m in (fp32, int8)}
    ids = {m: m.language_model.generate(video[m], prompts["input_ids"], prompts["attention_mask"],
                                        max_new_tokens=NEW_TOKENS)[0] for m in (fp32, int8)}
    sequence = torch.cat([prompts["input_ids"][0], torch.tensor(ids[fp32], dtype=torch.long)]).unsqueeze(0)
    start = prompts["input_ids"].shape[1] - 1
    logits = {}
    for m in (fp32, int8):
        _, hidden = m.language_model(sequence, torch.ones_like(sequence), video[m])
        logits[m] = m.language_model.get_output_embeddings()(hidden[0, start:start + len(ids[fp32])])
    change = (logits[int8] - logits[fp32]).abs()
    top = logits[fp32].argmax(dim=-1, keepdim=True)
    slack = logits[fp32].gather(1, top) - logits[fp32] - change - change.gather(1, top)
    decided = int((slack.scatter(1, top, float("inf")).amin(dim=-1) > 1e-4).long().cumprod(0).sum())
    equal = sum(a == b for a, b in zip(ids[fp32][:decided], ids[int8][:decided]))
    return ids[fp32] == ids[int8], decided, equal


def predict_seconds(model: Grove, inputs, repeats: int) -> float:
    g, s, mask = inputs
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.predict(g, s, mask, caption_positions=torch.arange(4).unsqueeze(0), max_new_tokens=NEW_TOKENS)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def mib(n: int) -> str:
    return f"{n / 2 ** 20:8.2f} MiB"


def gb(n: int) -> str:
    return f"{n / 1e9:6.2f} GB ({n / 2 ** 30:6.2f} GiB)"


def tiny_size(seeds: int, repeats: int) -> None:
    model = tiny(0)
    print(f"tiny GROVE ({sum(p.numel() for p in model.parameters()):,} parameters; "
          f"{len(quantizable_linears(model))} linear layers quantised)")
    bf16 = copy.deepcopy(model).to(torch.bfloat16)
    print(f"  weights fp32          {mib(weight_bytes(model))}")
    print(f"  weights bf16          {mib(weight_bytes(bf16))}")
    print(f"  weights int8 + fp32   {mib(quantized_weight_bytes(model))}   (the rest kept in fp32)")
    print(f"  weights int8 + bf16   {mib(quantized_weight_bytes(bf16))}   (the rest kept in bf16)")
    same, decided, equal, box, obj, times = 0, 0, 0, 0.0, 0.0, {"fp32": [], "int8": []}
    for seed in range(seeds):
        fp32 = tiny(seed)
        int8 = copy.deepcopy(fp32)
        quantize_weights(int8, "int8")
        inputs = clip(seed)
        s, d, e = caption_agreement(fp32, int8, inputs[0])
        same, decided, equal = same + s, decided + d, equal + e
        out = [m.predict(*inputs, caption_positions=torch.arange(4).unsqueeze(0), captions=CAPTION)
               for m in (fp32, int8)]
        box = max(box, float((out[0].boxes - out[1].boxes).abs().max()))
        obj = max(obj, float((out[0].scores - out[1].scores).abs().max()))
        times["fp32"].append(predict_seconds(fp32, inputs, repeats))
        times["int8"].append(predict_seconds(int8, inputs, repeats))
    print(f"  agreement over {seeds} seeds: identical {NEW_TOKENS}-token captions {same}/{seeds}; "
          f"decided tokens identical {equal}/{decided}")
    print(f"  largest box difference {box:.2e} of the frame ({box * 128:.3f} px at the 128-px grounding size); "
          f"largest objectness difference {obj:.2e}")
    print(f"  Grove.predict, one 4-frame clip, {NEW_TOKENS} new tokens, {torch.get_num_threads()} threads: "
          f"fp32 {statistics.median(times['fp32']) * 1e3:.0f} ms, int8 {statistics.median(times['int8']) * 1e3:.0f} ms")


def real_size(config_paths: list[str]) -> None:
    from sizing.memory_estimator import build_meta_module

    config = read_stacked_yaml([ROOT / p for p in config_paths])
    model = build_meta_module(config).model
    total = sum(p.numel() for p in model.parameters())
    modules = dict(model.named_modules())
    quantized = sum(modules[name].weight.numel() for name in quantizable_linears(model))
    print(f"real size ({', '.join(config_paths)}; meta device): {total / 1e9:.3f} B parameters, "
          f"{quantized / 1e9:.3f} B ({100 * quantized / total:.1f} %) in the quantised linear layers")
    stored = weight_bytes(model)
    print(f"  as configured (LLM in its torch_dtype, the rest fp32): {gb(stored)}  -> int8: "
          f"{gb(quantized_weight_bytes(model))}")
    for dtype in (torch.float32, torch.bfloat16):
        cast = model.to(dtype)
        name = str(dtype).removeprefix("torch.")
        print(f"  every weight {name:8s}: {gb(weight_bytes(cast))}  -> int8 (rest {name}): "
              f"{gb(quantized_weight_bytes(cast))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--config", action="append", default=None, help="default configs/official/grove.yaml")
    args = parser.parse_args()
    tiny_size(args.seeds, args.repeats)
    real_size(args.config or ["configs/official/grove.yaml"])


if __name__ == "__main__":
    main()
