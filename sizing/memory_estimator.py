"""Per-GPU training memory of GROVE: weights, gradients, optimizer state and activations, by strategy;
and the memory of one inference process per weight precision (fp32, bf16, fp16, int8 weight-only).

Parameter counts come from the model built on the meta device from a training config (no
weights, no memory), with the freezing policy of that config. Activations come from the
architecture: for each block type, the tensors autograd keeps for the backward pass, counted in
values per token (the formulas are in :func:`activation_values` and docs/scaling.md). Engines
modelled, all with bf16 compute as Lightning and DeepSpeed run it:

- ``ddp``: Lightning ``bf16-mixed`` (autocast); every GPU holds the weights in their stored dtype,
  the gradients of the trainable ones plus DDP's bucket copy, and AdamW's two moments in the
  parameter dtype (fp32 master weights exactly where the parameters are fp32). Autocast keeps a
  bf16 copy of each fp32 weight it uses for the backward pass.
- ``zero2``: DeepSpeed ZeRO stage 2 with bf16: the engine casts the whole model to bf16; fp32
  master weights, AdamW moments and gradients of the trainable parameters are partitioned over
  the N GPUs, plus DeepSpeed's reduce buckets.
- ``fsdp``: FSDP full shard with Lightning ``bf16-mixed`` (bf16 compute copies): weights, gradients
  and optimizer state sharded over N GPUs in their stored dtype, plus the gathered bf16 copy of
  the root unit (what the wrap policy leaves unwrapped) and of two wrapped units at a time (the
  one running and the one prefetched).
- ``single``: one process, no engine, everything in the stored dtype (the CPU benchmark).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import nn

from models.grove.quantization import INT8_ROW_OVERHEAD_BYTES

STRATEGIES = ("ddp", "zero2", "fsdp")
GIB = 2 ** 30
# CUDA context, NCCL buffers and allocator fragmentation: not modelled, reserved per GPU.
DEFAULT_OVERHEAD_GIB = 3.0
# DeepSpeed's default (and configs/strategy/deepspeed_zero2.yaml's) reduce bucket, in values.
DEFAULT_BUCKET_VALUES = 200_000_000
# Classes the FSDP overlay (configs/strategy/fsdp.yaml) wraps as units, by class name.
FSDP_UNIT_CLASSES = ("LlamaDecoderLayer", "ResidualAttentionBlock", "Block", "SpatioTemporalAdapter")


# --------------------------------------------------------------------------------------- config
def build_meta_module(config: dict, layers: int | None = None, device: str = "meta"):
    """The config's ``GroveModule`` on the meta device, frozen as the config trains it.

    Checkpoint, weight and tokenizer paths are dropped (nothing is loaded; the LLM's geometry must
    then come from ``llama_config``). ``layers`` shortens the LLM; ``device="cpu"`` builds it with
    random weights (the CPU benchmark's setup).
    """
    from lightning_modules.grove_module import GroveModule
    from models.grove.configuration import part_configs
    from models.grove.convert_official import RELEASED_VOCAB_SIZES

    model = config.get("model") or {}
    if model.get("class_path", "lightning_modules.grove_module.GroveModule").rsplit(".", 1)[-1] != "GroveModule":
        raise ValueError(f"model.class_path: the memory estimator covers GroveModule, got {model.get('class_path')!r}")
    args = dict(model.get("init_args") or {})
    args.pop("optimizer", None)
    args.pop("lr_scheduler", None)
    args.pop("init_from_glamm", None)  # weights only: same shapes
    drop = {"global_encoder": {"checkpoint": None}, "grounding_encoder": {"checkpoint": None},
            "language_model": {"path": None, "tokenizer_path": None}, "decoder": {"checkpoint": None}}
    args.update({name: replace(cfg, **drop[name]) for name, cfg in part_configs(args).items()})
    lm = args["language_model"]
    if lm.llama_config is None:
        raise ValueError("model.init_args.language_model.llama_config: the memory estimator needs the LLM's geometry "
                         "(hidden_size, num_hidden_layers, ...) in the config; a 'path' is not read")
    if "vocab_size" not in lm.llama_config and lm.special_tokens in RELEASED_VOCAB_SIZES:
        # the tokenizer is not read: the released vocabulary's size (LLaMA's 32,000 + the added tokens)
        lm = args["language_model"] = replace(lm, llama_config={**lm.llama_config,
                                                                "vocab_size": RELEASED_VOCAB_SIZES[lm.special_tokens]})
    if layers is not None:
        args["language_model"] = replace(lm, llama_config={**lm.llama_config, "num_hidden_layers": int(layers)})
    with torch.device(device):
        return GroveModule(**args)


# --------------------------------------------------------------------------------------- parameters
def _any_trainable(module: nn.Module) -> bool:
    return any(p.requires_grad for p in module.parameters())


@dataclass
class ParameterSummary:
    """Counts and bytes of a model's parameters, as stored (before any engine casts them)."""

    total: int
    trainable: int
    stored_bytes: int              # all parameters in their dtype
    trainable_bytes: int           # trainable parameters in their dtype
    fp32: int                      # fp32 parameters (autocast runs them as bf16 copies)
    fsdp_largest_unit: int         # parameters of the largest unit the FSDP overlay wraps
    fsdp_largest_trainable_unit: int  # ... among the units with a trainable parameter
    fsdp_root: int                 # parameters outside every wrapped unit

    @classmethod
    def of(cls, model: nn.Module) -> "ParameterSummary":
        params = list(model.parameters())
        trainable = [p for p in params if p.requires_grad]
        units = [m for m in model.modules() if type(m).__name__ in FSDP_UNIT_CLASSES]
        outermost, inside = [], set()
        for unit in units:  # nested units (none in GROVE) would be counted once, in the outer one
            if id(unit) not in inside:
                outermost.append(unit)
                inside |= {id(m) for m in unit.modules()}
        unit_sizes = [sum(p.numel() for p in u.parameters()) for u in outermost]
        trainable_units = [size for size, u in zip(unit_sizes, outermost) if _any_trainable(u)]
        wrapped = sum(unit_sizes)
        return cls(
            total=sum(p.numel() for p in params),
            trainable=sum(p.numel() for p in trainable),
            stored_bytes=sum(p.numel() * p.element_size() for p in params),
            trainable_bytes=sum(p.numel() * p.element_size() for p in trainable),
            fp32=sum(p.numel() for p in params if p.dtype == torch.float32),
            fsdp_largest_unit=max(unit_sizes, default=0),
            fsdp_largest_trainable_unit=max(trainable_units, default=0),
            fsdp_root=sum(p.numel() for p in params) - wrapped,
        )


# --------------------------------------------------------------------------------------- activations
@dataclass(frozen=True)
class Workload:
    """One training sample: frames per clip, text tokens around the video, caption tokens, phrases."""

    frames: int = 8
    text_tokens: int = 128         # prompt text + caption, besides the video tokens
    answer_tokens: int = 64        # caption tokens with a label (the LM loss positions)
    phrases: int = 4               # [DET] queries decoded on every frame


def clip_block_values(tokens: int, width: int, heads: int, mlp: int, quick_gelu: bool) -> int:
    """Values an open_clip ``ResidualAttentionBlock`` keeps for backward (frozen weights, input with grad).

    LayerNorm inputs (2 x width) and statistics (2 x 2), the q/k/v projection (3 x width), the
    attention output (width) and its log-sum-exp (heads), the MLP's hidden layer (mlp), plus the
    sigmoid of QuickGELU (mlp) - per token.
    """
    return tokens * (6 * width + mlp * (2 if quick_gelu else 1) + heads + 4)


def sam_block_values(grid: int, width: int, heads: int, mlp: int, window: int) -> int:
    """Values a SAM ViT ``Block`` keeps for backward on one ``grid x grid`` frame.

    Per token: LayerNorm inputs (2 x width) and statistics (4), the MLP hidden layer (mlp). Per
    attended token (windows pad the grid to a multiple of ``window``): q/k/v (3 x width), the
    scaled query (width) and the softmax probabilities (heads x attended length) - SAM computes
    attention explicitly, so the score matrix is kept.
    """
    tokens = grid * grid
    if window > 0:
        padded = math.ceil(grid / window) * window
        attended, length = padded * padded, window * window
    else:
        attended, length = tokens, tokens
    return tokens * (2 * width + mlp + 4) + attended * (4 * width + heads * length)


def llama_layer_values(seq: int, hidden: int, heads: int, kv_heads: int, ffn: int) -> int:
    """Values a LLaMA decoder layer keeps for backward (frozen weights; SDPA/FlashAttention).

    Per token: RMSNorm inputs (2 x hidden) and statistics (2), rotated q and k, v, the attention
    output (2 x hidden + 2 x kv width), the log-sum-exp (heads), and the SwiGLU's gate, its SiLU and
    the up projection (3 x ffn).
    """
    kv = hidden * kv_heads // heads
    return seq * (4 * hidden + 2 * kv + 3 * ffn + heads + 2)


def decoder_values(grid_tokens: int, dim: int, depth: int, heads: int, tokens: int) -> int:
    """Values SAM's two-way transformer keeps for one (phrase, frame) pair.

    Per image token, each of the ``depth`` two-way blocks keeps 7 dim-wide tensors (the image
    side of the token-to-image and image-to-token attentions at their half-width projections,
    LayerNorm inputs, the positional sums) and two attention maps over the ``tokens`` output
    tokens; the final token-to-image attention adds one more tensor and map.
    """
    return grid_tokens * ((7 * depth + 1) * dim + (2 * depth + 1) * heads * tokens + 2 * depth)


def activation_values(model: nn.Module, workload: Workload, checkpointing: bool) -> dict[str, int]:
    """Saved values for backward per sample, by component, for a ``models.grove.Grove``.

    Only blocks the gradient passes through keep activations: CLIP's from the first trainable
    point (the first adapter when the backbone is frozen), SAM's from its trainable positional
    embedding on, the whole LLM (its inputs carry the trainable video tokens and embeddings).
    With ``checkpointing``, a block keeps only its input, and the block being recomputed holds
    its full activations once (``recompute``).
    """
    t = workload.frames
    out: dict[str, int] = {}
    recompute = 0

    # global encoder: CLIP ViT + adapters + pooling + projector
    ge = model.global_encoder
    tower = ge.backbone
    block = tower.transformer.resblocks[0]
    width = ge.width
    patch = tower.conv1.kernel_size[0]
    grid_tokens = (ge.config.image_size // patch) ** 2
    tokens = grid_tokens + 1
    if _any_trainable(tower):
        first = 0
    elif ge.adapter_positions and _any_trainable(ge.adapters):
        first = min(ge.adapter_positions) + 1
    else:
        first = ge.num_blocks
    in_graph = max(ge.num_blocks - first, 0)
    full = t * clip_block_values(tokens, width, block.attn.num_heads, block.mlp.c_fc.out_features,
                                 type(block.mlp.gelu).__name__ == "QuickGELU")
    if checkpointing and in_graph:
        out["clip_blocks"] = in_graph * t * tokens * width
        recompute = max(recompute, full)
    else:
        out["clip_blocks"] = in_graph * full
    out["clip_adapters"] = len(ge.adapters) * t * 2 * grid_tokens * width if _any_trainable(ge.adapters) else 0
    video = ge.num_video_tokens
    llm_hidden = model.language_model.hidden_size
    out["pool_projector"] = t * grid_tokens * width + video * (width + 2 * llm_hidden)

    # grounding encoder: SAM ViT + adapters + neck
    gr = model.grounding_encoder
    enc = gr.backbone
    grid = gr.grid_size
    sam_width = enc.patch_embed.proj.out_channels
    blocks = list(enc.blocks)
    if gr.pos_embed.requires_grad or _any_trainable(enc.patch_embed):
        first = 0
    else:
        trainable_at = [i for i, b in enumerate(blocks) if _any_trainable(b)]
        trainable_at += [i + 1 for i in gr.adapter_positions] if _any_trainable(gr.adapters) else []
        first = min(trainable_at, default=len(blocks))
    sam_full = [t * sam_block_values(grid, sam_width, b.attn.num_heads, b.mlp.lin1.out_features, b.window_size)
                for b in blocks[first:]]
    if checkpointing and sam_full:
        out["sam_blocks"] = len(sam_full) * t * grid * grid * sam_width
        recompute = max(recompute, *sam_full)
    else:
        out["sam_blocks"] = sum(sam_full)
    out["sam_adapters"] = len(gr.adapters) * t * 2 * grid * grid * sam_width if _any_trainable(gr.adapters) else 0
    out["sam_neck"] = t * grid * grid * (sam_width + 6 * gr.out_chans + 2) if sam_full else 0

    # language model
    cfg = model.language_model.model.config
    seq = video + workload.text_tokens
    layer = llama_layer_values(seq, cfg.hidden_size, cfg.num_attention_heads,
                               getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads,
                               cfg.intermediate_size)
    if checkpointing:
        out["llm_layers"] = cfg.num_hidden_layers * seq * cfg.hidden_size
        recompute = max(recompute, layer)
    else:
        out["llm_layers"] = cfg.num_hidden_layers * layer
    out["llm_head"] = seq * (cfg.hidden_size + 1) + workload.answer_tokens * (cfg.hidden_size + 3 * cfg.vocab_size)

    # [DET] queries, box decoder, heads
    out["query_projector"] = workload.phrases * 3 * llm_hidden
    dec = model.box_decoder
    output_tokens = (dec.output_tokens.shape[0] if dec.output_tokens is not None else 0) + 1
    out["box_decoder"] = workload.phrases * t * decoder_values(
        grid * grid, dec.config.dim, len(dec.transformer.layers), dec.config.num_heads, output_tokens)
    out["recompute"] = recompute
    return out


def activation_bytes(parts: dict[str, int], activation_bytes: int = 2, llm_bytes: int | None = None) -> float:
    """Bytes of :func:`activation_values`' parts; the LLM's parts at ``llm_bytes`` when its dtype
    differs from the rest (e.g. a bf16 LLM beside fp32 encoders without autocast)."""
    llm = activation_bytes if llm_bytes is None else llm_bytes
    return float(sum(v * (llm if k.startswith("llm_") else activation_bytes) for k, v in parts.items()))


# --------------------------------------------------------------------------------------- per GPU
@dataclass
class MemoryEstimate:
    """Bytes per GPU by kind; ``total`` includes ``overhead``."""

    strategy: str
    gpus: int
    micro_batch: int
    checkpointing: bool
    weights: float
    gradients: float
    optimizer: float
    activations: float
    overhead: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.overhead


def estimate(params: ParameterSummary, values_per_sample: int, strategy: str, gpus: int, micro_batch: int,
             checkpointing: bool, activation_bytes: int = 2, overhead_gib: float = DEFAULT_OVERHEAD_GIB,
             bucket_values: int = DEFAULT_BUCKET_VALUES) -> MemoryEstimate:
    """Memory per GPU of one training step (the steady state: optimizer state already allocated).

    ``values_per_sample`` is the sum of :func:`activation_values`; activations scale with
    ``micro_batch`` and are stored in bf16 (``activation_bytes`` = 2) in every engine here.
    """
    n = int(gpus)
    if n < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    acts = float(values_per_sample) * micro_batch * activation_bytes
    if strategy == "single":
        weights, grads = params.stored_bytes, params.trainable_bytes
        optim = 2 * params.trainable_bytes
    elif strategy == "ddp":
        # plus autocast's bf16 copies of the fp32 weights (kept for the backward pass)
        weights = params.stored_bytes + 2 * params.fp32
        grads = 2 * params.trainable_bytes                       # .grad + DDP's reducer bucket
        optim = 2 * params.trainable_bytes                       # AdamW exp_avg, exp_avg_sq
    elif strategy == "zero2":
        weights = 2 * params.total                               # the engine casts the model to bf16
        # bf16 gradient partition, its fp32 copy at the step, two bf16 reduce buckets (overlap_comm)
        grads = (2 + 4) * params.trainable / n + 2 * 2 * min(bucket_values, params.trainable)
        optim = (4 + 8) * params.trainable / n                   # fp32 master + AdamW moments
    elif strategy == "fsdp":
        gathered = 2 * (params.fsdp_root + 2 * params.fsdp_largest_unit)   # bf16 working copies
        weights = params.stored_bytes / n + gathered
        grads = params.trainable_bytes / n + 2 * params.fsdp_largest_trainable_unit   # + one unsharded unit
        optim = 2 * params.trainable_bytes / n
    else:
        raise ValueError(f"strategy must be one of {STRATEGIES + ('single',)}, got {strategy!r}")
    return MemoryEstimate(strategy, n, micro_batch, checkpointing, float(weights), float(grads), float(optim),
                          acts, overhead_gib * GIB)


def table(params: ParameterSummary, values: dict[bool, int], gpus: int, micro_batches=range(1, 9),
          strategies=STRATEGIES, overhead_gib: float = DEFAULT_OVERHEAD_GIB) -> list[MemoryEstimate]:
    """Estimates for every strategy x checkpointing x micro-batch; ``values`` maps checkpointing to
    the per-sample saved values."""
    return [estimate(params, values[ckpt], strategy, gpus, mb, ckpt, overhead_gib=overhead_gib)
            for strategy in strategies for ckpt in (False, True) for mb in micro_batches]


def largest_fitting(rows: list[MemoryEstimate], capacity_gib: float) -> dict[tuple[str, bool], int]:
    """The largest micro-batch that fits ``capacity_gib`` per (strategy, checkpointing); 0 = none."""
    best: dict[tuple[str, bool], int] = {}
    for row in rows:
        key = (row.strategy, row.checkpointing)
        best.setdefault(key, 0)
        if row.total <= capacity_gib * GIB:
            best[key] = max(best[key], row.micro_batch)
    return best


# --------------------------------------------------------------------------------------- inference
# Weight precisions of an inference run. ``int8``: weight-only int8 as models.grove.quantization
# applies it (the backbones' linear weights 1 byte plus a float32 scale and an int8 zero point per
# output row; everything else bf16).
INFERENCE_PRECISIONS = ("fp32", "bf16", "fp16", "int8")
# CUDA context and allocator fragmentation of one inference process (no NCCL, no optimizer).
DEFAULT_INFERENCE_OVERHEAD_GIB = 1.5
# GPU memory sizes (GiB, as the cards' "GB" are) a table row is matched against.
GPU_SIZES_GIB = (16, 24, 40, 48, 80, 141)


@dataclass
class InferenceParameters:
    """A model's weights by the dtype class each gets at inference (docs/precision.md).

    ``linear``: values of the ``nn.Linear`` weights weight-only int8 quantises
    (:func:`models.grove.quantization.quantizable_linears`), ``linear_rows`` their output rows (a scale
    and a zero point each); ``fp32_islands``: buffers kept fp32 in every precision
    (:mod:`models.grove.fp32_buffers`); ``other``: every other parameter and floating buffer
    (embeddings, the LM head, the trained parts, biases, norms, convolutions, positional tables, CLIP's
    fused attention projections)."""

    linear: int
    linear_rows: int
    fp32_islands: int
    other: int

    @classmethod
    def of(cls, model: nn.Module, quantised_linears: list[str] | None = None) -> "InferenceParameters":
        """``quantised_linears``: names of the linear layers int8 quantises (default: GROVE's,
        :func:`models.grove.quantization.quantizable_linears`)."""
        from models.grove.fp32_buffers import KeepsBuffersFp32
        from models.grove.quantization import quantizable_linears

        modules = dict(model.named_modules())
        names = quantizable_linears(model) if quantised_linears is None else quantised_linears
        quantised = [modules[name].weight for name in names]
        quantised_ids = {id(w) for w in quantised}
        island_ids = {id(m._buffers[name]) for owner in model.modules() if isinstance(owner, KeepsBuffersFp32)
                      for m in owner.modules() for name in owner.fp32_buffers
                      if isinstance(m._buffers.get(name), torch.Tensor)}
        tensors = {id(t): t for t in [*model.parameters(), *model.buffers()] if t.is_floating_point()}
        return cls(linear=sum(w.numel() for w in quantised), linear_rows=sum(w.shape[0] for w in quantised),
                   fp32_islands=sum(tensors[i].numel() for i in island_ids if i in tensors),
                   other=sum(t.numel() for i, t in tensors.items() if i not in quantised_ids and i not in island_ids))

    @property
    def total(self) -> int:
        return self.linear + self.fp32_islands + self.other

    def weight_bytes(self, precision: str) -> float:
        """Bytes of every weight at ``precision`` (one of :data:`INFERENCE_PRECISIONS`)."""
        islands = 4 * self.fp32_islands
        if precision == "fp32":
            return float(4 * (self.linear + self.other) + islands)
        if precision in ("bf16", "fp16"):
            return float(2 * (self.linear + self.other) + islands)
        if precision == "int8":
            return float(self.linear + INT8_ROW_OVERHEAD_BYTES * self.linear_rows + 2 * self.other + islands)
        raise ValueError(f"precision must be one of {INFERENCE_PRECISIONS}, got {precision!r}")


def inference_activation_values(model: nn.Module, workload: Workload, max_new_tokens: int = 64) -> dict[str, int]:
    """Values alive at once while one clip is predicted (no autograd: one block's tensors at a time).

    ``kv_cache``: the caption's greedy decoding keeps keys and values of every LLM layer for the
    video tokens, the prompt and ``max_new_tokens``. The other entries are the working set of the
    largest block of each part on one window of ``workload.frames`` frames (the formulas of
    :func:`activation_values` for one block, which count what a block's forward holds), of which
    only the largest is alive at a time: ``peak`` (their maximum) + the KV cache is what one clip adds
    to the weights.
    """
    t = workload.frames
    ge = model.global_encoder
    tower = ge.backbone
    block = tower.transformer.resblocks[0]
    grid_tokens = (ge.config.image_size // tower.conv1.kernel_size[0]) ** 2
    out = {"clip_block": t * clip_block_values(grid_tokens + 1, ge.width, block.attn.num_heads,
                                               block.mlp.c_fc.out_features,
                                               type(block.mlp.gelu).__name__ == "QuickGELU")}
    gr = model.grounding_encoder
    enc = gr.backbone
    sam_width = enc.patch_embed.proj.out_channels
    out["sam_block"] = max(t * sam_block_values(gr.grid_size, sam_width, b.attn.num_heads, b.mlp.lin1.out_features,
                                                b.window_size) for b in enc.blocks)
    cfg = model.language_model.model.config
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    seq = model.num_video_tokens + workload.text_tokens
    out["llm_layer"] = llama_layer_values(seq, cfg.hidden_size, heads, kv_heads, cfg.intermediate_size)
    out["llm_logits"] = cfg.vocab_size  # greedy decoding computes the last position's logits only
    dec = model.box_decoder
    output_tokens = (dec.output_tokens.shape[0] if dec.output_tokens is not None else 0) + 1
    out["box_decoder"] = workload.phrases * t * decoder_values(gr.grid_size ** 2, dec.config.dim,
                                                               len(dec.transformer.layers), dec.config.num_heads,
                                                               output_tokens)
    out["peak"] = max(out.values())
    kv_width = cfg.hidden_size * kv_heads // heads
    out["kv_cache"] = 2 * cfg.num_hidden_layers * (model.num_video_tokens + workload.text_tokens + max_new_tokens) \
        * kv_width
    return out


@dataclass
class InferenceEstimate:
    """Bytes of one inference process at ``precision``; ``total`` includes ``overhead``."""

    precision: str
    weights: float
    activations: float
    kv_cache: float
    overhead: float

    @property
    def total(self) -> float:
        return self.weights + self.activations + self.kv_cache + self.overhead

    def smallest_gpu(self, sizes_gib=GPU_SIZES_GIB) -> int | None:
        """The smallest GPU memory size (GiB) that holds ``total``; None if none does."""
        return next((size for size in sorted(sizes_gib) if self.total <= size * GIB), None)


def inference_table(params: InferenceParameters, values: dict[str, int],
                    overhead_gib: float = DEFAULT_INFERENCE_OVERHEAD_GIB) -> list[InferenceEstimate]:
    """One :class:`InferenceEstimate` per :data:`INFERENCE_PRECISIONS`; activations and the KV cache
    in the compute dtype (fp32 for fp32, else 2 bytes: int8 weights compute in bf16)."""
    rows = []
    for precision in INFERENCE_PRECISIONS:
        act = 4 if precision == "fp32" else 2
        rows.append(InferenceEstimate(precision, params.weight_bytes(precision), float(values["peak"] * act),
                                      float(values["kv_cache"] * act), overhead_gib * GIB))
    return rows


__all__ = ["InferenceParameters", "inference_activation_values", "InferenceEstimate", "inference_table",
           "INFERENCE_PRECISIONS", "GPU_SIZES_GIB", "DEFAULT_INFERENCE_OVERHEAD_GIB", "build_meta_module",
           "ParameterSummary", "Workload", "activation_values", "activation_bytes",
           "clip_block_values", "sam_block_values", "llama_layer_values", "decoder_values", "MemoryEstimate",
           "estimate", "table", "largest_fitting", "STRATEGIES", "GIB"]
