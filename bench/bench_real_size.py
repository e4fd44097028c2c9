"""One GROVE training step (and one clip's prediction) at real sizes: time, peak memory and MFU,
next to the memory estimator.

    python bench/bench_real_size.py [--config configs/official/grove.yaml] [--frames 8] [--llm-layers 2]
                                    [--no-checkpointing] [--steps 2] [--threads 2]
    # on a GPU, the whole released model in true bf16 (weights and activations), random weights:
    python bench/bench_real_size.py --device cuda --dtype bfloat16 --llm-layers 32 --predict

On a GPU, memory is CUDA's peak allocated memory. MFU is the model FLOPs over the device's dense
peak for the dtype (``--peak-tflops``; known for A100, H100 and H200): for training 3 x the forward
pass's FLOPs (the PaLM convention: recomputation under checkpointing is not counted), for prediction
the FLOPs of the call; both counted by ``torch.utils.flop_counter`` in an untimed run of the same
step (matrix products and convolutions; it misses the attention scores inside
``nn.MultiheadAttention`` on the CPU, see sizing/flops.py).

The model of the config with random weights: CLIP ViT-L/14-336 with its adapters, SAM ViT-H at
512 px with its adapters, the LLM shortened to ``--llm-layers`` layers at its real width and
vocabulary (hidden 4096, 32,010 tokens), the box decoder and heads. One sample (micro-batch 1)
of ``--frames`` frames with a grounded-caption prompt (576 video tokens, phrases ending in
[DET]) and random box targets goes through GroveModule's training loss, backward and an AdamW
step on the parameter groups the config trains. Step 1 also allocates the optimizer state; the
later steps are the steady state that the memory estimator describes. Peak memory is the process's
peak resident set; the prediction is sizing/memory_estimator.py's "single" engine (no
sharding, weights in their stored dtype, no autocast) plus the process's resident set before
the model was built.
"""
from __future__ import annotations

import core  # noqa: F401

import argparse
import resource
import time
from pathlib import Path

import psutil
import torch

from models.grove.configuration import read_stacked_yaml
from sizing.memory_estimator import (
    GIB,
    ParameterSummary,
    Workload,
    activation_bytes,
    activation_values,
    build_meta_module,
    estimate,
)

ROOT = Path(__file__).resolve().parent.parent


def rss() -> int:
    return psutil.Process().memory_info().rss


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def make_batch(model, frames: int, phrases: int, text_tokens: int, answer_tokens: int, seed: int = 0) -> dict:
    """One random training sample in the layout GroveModule.compute_losses reads."""
    g = torch.Generator().manual_seed(seed)
    lm = model.language_model
    vocab = lm.get_input_embeddings().num_embeddings
    prompt = text_tokens - answer_tokens
    before = prompt // 2
    text = lambda n: torch.randint(3, min(vocab, 1000), (n,), generator=g)  # noqa: E731
    answer = text(answer_tokens)
    answer[torch.linspace(3, answer_tokens - 2, phrases).long()] = lm.det_token_id
    ids = torch.cat((torch.tensor([1]), text(before - 1), torch.full((model.num_video_tokens,), lm.video_token_id),
                     text(prompt - before), answer)).unsqueeze(0)
    labels = ids.clone()
    labels[:, : ids.shape[1] - answer_tokens] = -100
    centre = torch.rand(1, frames, phrases, 2, generator=g) * 0.6 + 0.2
    size = torch.rand(1, frames, phrases, 2, generator=g) * 0.3 + 0.1
    return {
        "global_frames": torch.randn(1, frames, 3, *(model.global_encoder.config.image_size,) * 2, generator=g),
        "grounding_frames": torch.randn(1, frames, 3, *(model.grounding_encoder.config.image_size,) * 2, generator=g),
        "input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels,
        "phrase_mask": torch.ones(1, phrases, dtype=torch.bool),
        "boxes": torch.cat((centre, size), dim=-1),
        "present": torch.rand(1, frames, phrases, generator=g) > 0.2,
        "keys": ["bench"],
    }


# Dense (no sparsity) tensor-core peaks in TFLOP/s, by device-name fragment and dtype.
PEAK_TFLOPS = {"H200": {"bfloat16": 989.0, "float16": 989.0, "float32": 67.0},
               "H100": {"bfloat16": 989.0, "float16": 989.0, "float32": 67.0},
               "A100": {"bfloat16": 312.0, "float16": 312.0, "float32": 19.5}}


def device_peak_tflops(device: torch.device, dtype: str) -> float | None:
    """The device's dense peak for ``dtype`` from its name, or None where unknown (the CPU)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peaks[dtype] for fragment, peaks in PEAK_TFLOPS.items() if fragment in name), None)


class _WholeRun:
    """Stands in for FlopCounterMode's per-module tracker, whose backward hooks break on inputs that
    need grad inside checkpointed or no-grad regions: everything is counted once, as "Global"."""

    parents = ("Global",)

    def __enter__(self):
        return self

    def __exit__(self, *args):
        return False


def counted_flops(fn) -> tuple[object, int]:
    """``fn()``'s result and the matrix-product FLOPs ``torch.utils.flop_counter`` counts while it runs."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    counter.mod_tracker = _WholeRun()
    with counter:
        out = fn()
    return out, counter.get_total_flops()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _peak(device: torch.device) -> float:
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else peak_rss()


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", action="append", default=None, help="default configs/official/grove.yaml")
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--llm-layers", type=int, default=2)
    parser.add_argument("--no-checkpointing", action="store_true",
                        help="keep every activation (default: gradient checkpointing in CLIP, SAM and the LLM)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--phrases", type=int, default=Workload.phrases)
    parser.add_argument("--text-tokens", type=int, default=Workload.text_tokens)
    parser.add_argument("--answer-tokens", type=int, default=Workload.answer_tokens)
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:i]")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                        help="the dtype of every weight and activation (true 16-bit, no fp32 master copy): "
                             "the model's deliberate fp32 parts stay fp32")
    parser.add_argument("--predict", action="store_true", help="also time one clip's prediction (greedy caption, "
                                                              "grounding on every frame)")
    parser.add_argument("--new-tokens", type=int, default=64, help="greedy caption budget of --predict")
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="the device's dense peak for --dtype (default: known GPUs by name)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    checkpointing = not args.no_checkpointing
    config = read_stacked_yaml(args.config or [ROOT / "configs" / "official" / "grove.yaml"])
    for part in ("global_encoder", "grounding_encoder", "language_model"):
        config["model"]["init_args"][part]["gradient_checkpointing"] = checkpointing
    workload = Workload(frames=args.frames, text_tokens=args.text_tokens, answer_tokens=args.answer_tokens,
                        phrases=args.phrases)

    # the prediction, from the same config built on the meta device
    meta = build_meta_module(config, layers=args.llm_layers)
    params = ParameterSummary.of(meta.model)
    llm_bytes = meta.model.language_model.get_input_embeddings().weight.element_size()
    parts = activation_values(meta.model, workload, checkpointing)
    predicted_acts = activation_bytes(parts, activation_bytes=4, llm_bytes=llm_bytes)
    fixed = estimate(params, 0, "single", 1, 1, checkpointing, overhead_gib=0.0)
    del meta

    baseline = rss()
    start = time.perf_counter()
    module = build_meta_module(config, layers=args.llm_layers, device="cpu")
    if dtype != torch.float32:
        module.to(dtype)
    module.to(device)
    module.train()
    build_s = time.perf_counter() - start
    after_build = rss()
    assert ParameterSummary.of(module.model).total == params.total
    trained = [p for p in module.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=5e-5, betas=(0.9, 0.95), weight_decay=0.0)
    batch = make_batch(module.model, args.frames, args.phrases, workload.text_tokens, args.answer_tokens)
    batch = {k: (v.to(device, dtype) if torch.is_tensor(v) and v.is_floating_point() else
                 v.to(device) if torch.is_tensor(v) else v) for k, v in batch.items()}
    peak_tflops = args.peak_tflops or device_peak_tflops(device, args.dtype)
    with torch.no_grad():  # the same products as the training forward, without autograd's hooks
        _, forward_flops = counted_flops(lambda: module.compute_losses(batch))
    step_flops = 3 * forward_flops
    times = []
    for step in range(args.steps):
        _sync(device)
        start = time.perf_counter()
        losses, _, _ = module.compute_losses(batch)
        optimizer.zero_grad(set_to_none=True)
        losses["loss"].backward()
        optimizer.step()
        _sync(device)
        times.append(time.perf_counter() - start)
        mfu = f", MFU {step_flops / times[-1] / (peak_tflops * 1e12):.1%}" if peak_tflops else ""
        print(f"step {step + 1}: {times[-1]:.2f} s, loss {float(losses['loss'].detach()):.3f}, "
              f"peak memory so far {_peak(device) / GIB:.2f} GiB{mfu}", flush=True)
    train_peak = _peak(device)
    predict = None
    if args.predict:
        optimizer.zero_grad(set_to_none=True)
        del optimizer
        module.eval()
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        model = module.model
        frames = {"global_frames": batch["global_frames"], "grounding_frames": batch["grounding_frames"],
                  "frame_mask": torch.ones(1, args.frames, dtype=torch.bool, device=device),
                  # a clip of exactly one window: captioned from all of its frames
                  "caption_positions": torch.arange(min(args.frames, 8), device=device)[None]}
        seconds = []
        run = lambda: model.predict(**frames, window=min(args.frames, 8), max_new_tokens=args.new_tokens)  # noqa: E731
        with torch.inference_mode():
            _, flops = counted_flops(run)  # also warms up kernels and the allocator
            for _ in range(2):
                _sync(device)
                start = time.perf_counter()
                out = run()
                _sync(device)
                seconds.append(time.perf_counter() - start)
        phrases = len(out.phrases[0])
        predict = {"seconds": seconds, "peak_gib": _peak(device) / GIB, "forward_tflop": flops / 1e12,
                   "mfu": flops / seconds[-1] / (peak_tflops * 1e12) if peak_tflops else None}
        print(f"predict one clip: {seconds[-1]:.2f} s (again {seconds[0]:.2f} s), {phrases} phrase(s), peak "
              f"memory {predict['peak_gib']:.2f} GiB, {flops / 1e12:.2f} TFLOP"
              + (f", MFU {predict['mfu']:.1%}" if predict["mfu"] is not None else ""), flush=True)
    predicted_peak = baseline + fixed.total + predicted_acts
    result = {
        "frames": args.frames, "llm_layers": args.llm_layers, "checkpointing": checkpointing,
        "threads": args.threads, "parameters": params.total, "trainable": params.trainable,
        "build_s": build_s, "step_s": times, "baseline_rss_gib": baseline / GIB,
        "weights_rss_gib": (after_build - baseline) / GIB, "peak_rss_gib": peak_rss() / GIB,
        "predicted_weights_gib": fixed.weights / GIB, "predicted_grads_gib": fixed.gradients / GIB,
        "predicted_optimizer_gib": fixed.optimizer / GIB, "predicted_activations_gib": predicted_acts / GIB,
        "predicted_peak_gib": predicted_peak / GIB, "device": str(device), "dtype": args.dtype,
        "train_peak_gib": train_peak / GIB, "train_tflop_per_step": step_flops / 1e12,
        "train_mfu": step_flops / times[-1] / (peak_tflops * 1e12) if peak_tflops else None, "predict": predict,
    }
    sizes = (module.model.global_encoder.config.image_size, module.model.grounding_encoder.config.image_size)
    print(f"setup: {args.frames} frames at {sizes[0]}/{sizes[1]} px, LLM {args.llm_layers} layers at hidden "
          f"{module.model.language_model.hidden_size}, vocabulary "
          f"{module.model.language_model.get_input_embeddings().num_embeddings}, micro-batch 1, gradient "
          f"checkpointing {'on' if checkpointing else 'off'}, {args.threads} threads")
    print(f"parameters {params.total:,} (trainable {params.trainable:,}); model built in {build_s:.1f} s")
    print("step times: " + ", ".join(f"{t:.2f} s" for t in times) + f"; {step_flops / 1e12:.3f} TFLOP model FLOPs "
          "per step" + (f", MFU {result['train_mfu']:.1%} of {peak_tflops:g} TFLOP/s" if peak_tflops else ""))
    print(f"resident memory: before the model {baseline / GIB:.2f} GiB, with the model "
          f"{after_build / GIB:.2f} GiB, peak {peak_rss() / GIB:.2f} GiB")
    print(f"memory estimator: weights {fixed.weights / GIB:.2f} + gradients {fixed.gradients / GIB:.2f} + optimizer "
          f"{fixed.optimizer / GIB:.2f} + activations {predicted_acts / GIB:.2f} + before-model "
          f"{baseline / GIB:.2f} = {predicted_peak / GIB:.2f} GiB (measured/predicted "
          f"{peak_rss() / predicted_peak:.2f})")
    return result


if __name__ == "__main__":
    main()
