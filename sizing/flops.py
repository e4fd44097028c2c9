"""Forward FLOPs of one GROVE prediction, counted analytically, for sizing a prediction job.

A FLOP is one multiply or one add: a matrix product of ``(n, k) @ (k, m)`` counts ``2 n k m``
(two per multiply-accumulate), as ``torch.utils.flop_counter.FlopCounterMode`` counts. Only the
matrix products and convolutions are counted (they are > 99 % of the work); norms, activations,
softmax, pooling and rotary embeddings are left out. Attention's quadratic term is included:
``Q K^T`` and ``softmax(.) V`` are ``2 * 2 * queries * keys * width``.

The parts follow the GROVE paper (sec. 3 and supp. C) and ``configs/official/grove.yaml``: the
global tower is CLIP ViT-L/14 at 336 px up to its second-last block with 3D-convolution adapters,
pooled to 8 x 8 x 9 tokens and projected by VL; the grounding tower is SAM ViT-H built at 512 px
(windowed attention in 14 x 14 windows, global attention and an adapter in blocks 7, 15, 23, 31)
with SAM's neck; the LLM is a LLaMA-7B (Vicuna) that reads the prompt with the video tokens and
writes the caption greedily with a key/value cache; the box decoder is SAM's two-way transformer
run once per frame for the [DET] queries, then the box and objectness heads.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


def linear_flops(tokens: int, d_in: int, d_out: int) -> int:
    """``tokens`` rows through a ``d_in -> d_out`` linear layer (bias adds left out)."""
    return 2 * tokens * d_in * d_out


def attention_core_flops(queries: int, keys: int, width: int) -> int:
    """The quadratic term: ``Q K^T`` and the weighted sum of ``V`` over all heads (``width`` = heads x head dim)."""
    return 2 * 2 * queries * keys * width


def attention_flops(queries: int, keys: int, dim: int, inner: int | None = None) -> int:
    """A multi-head attention layer: Q from ``queries`` rows, K and V from ``keys`` rows, the output
    projection, and the quadratic term. ``inner`` is the projected width (SAM's decoder halves it)."""
    inner = dim if inner is None else inner
    projections = linear_flops(queries, dim, inner) + 2 * linear_flops(keys, dim, inner)
    return projections + attention_core_flops(queries, keys, inner) + linear_flops(queries, inner, dim)


def mlp_flops(tokens: int, dim: int, hidden: int, gated: bool = False) -> int:
    """A transformer MLP: two matrices, or three for a gated (SwiGLU, LLaMA) one."""
    return (3 if gated else 2) * linear_flops(tokens, dim, hidden)


def conv_flops(outputs: int, c_in: int, c_out: int, kernel_volume: int) -> int:
    """A convolution producing ``outputs`` positions (stride 1, same padding: outputs = inputs)."""
    return 2 * outputs * c_in * c_out * kernel_volume


def clip_tower_flops(frames: int = 8, image_size: int = 336, patch: int = 14, width: int = 1024,
                     blocks: int = 23, mlp_ratio: float = 4.0, adapters: int = 8, adapter_kernel: int = 27,
                     pooled_tokens: int = 576, llm_dim: int = 4096) -> int:
    """The global tower V_c: patch embedding, ``blocks`` ViT blocks (class token included), the
    adapters' 3D convolutions over the patch grid, and VL on the pooled tokens."""
    patches = (image_size // patch) ** 2
    tokens = patches + 1
    per_frame = conv_flops(patches, 3, width, patch * patch)
    per_frame += blocks * (attention_flops(tokens, tokens, width) + mlp_flops(tokens, width, int(width * mlp_ratio)))
    adapter = conv_flops(frames * patches, width, width, adapter_kernel)
    projector = linear_flops(pooled_tokens, width, llm_dim) + linear_flops(pooled_tokens, llm_dim, llm_dim)
    return frames * per_frame + adapters * adapter + projector


def sam_tower_flops(frames: int = 8, image_size: int = 512, patch: int = 16, width: int = 1280, depth: int = 32,
                    num_heads: int = 16, global_blocks: int = 4, window: int = 14, mlp_ratio: float = 4.0,
                    out_chans: int = 256, adapter_kernel: int = 27) -> int:
    """The grounding tower V_g: SAM's ViT. Windowed blocks pad the grid to whole windows and project
    the padded tokens; global blocks attend over the whole grid and carry an adapter. Decomposed
    relative positions add ``q . R_h`` and ``q . R_w`` per token; SAM's neck ends it."""
    side = image_size // patch
    grid = side * side
    padded_side = math.ceil(side / window) * window
    windows = (padded_side // window) ** 2
    window_tokens = window * window
    head_dim = width // num_heads
    mlp = mlp_flops(grid, width, int(width * mlp_ratio))

    def rel_pos(tokens: int, h: int, w: int) -> int:
        return 2 * tokens * (h + w) * head_dim * num_heads

    windowed = (linear_flops(windows * window_tokens, width, 3 * width)
                + windows * attention_core_flops(window_tokens, window_tokens, width)
                + linear_flops(windows * window_tokens, width, width)
                + rel_pos(windows * window_tokens, window, window) + mlp)
    global_ = attention_flops(grid, grid, width) + rel_pos(grid, side, side) + mlp
    per_frame = conv_flops(grid, 3, width, patch * patch)
    per_frame += (depth - global_blocks) * windowed + global_blocks * global_
    per_frame += conv_flops(grid, width, out_chans, 1) + conv_flops(grid, out_chans, out_chans, 9)
    adapters = global_blocks * conv_flops(frames * grid, width, width, adapter_kernel)
    return frames * per_frame + adapters


def llama_flops(prompt_tokens: int, new_tokens: int, hidden: int = 4096, intermediate: int = 11008,
                layers: int = 32, vocab: int = 32010, causal: bool = True) -> int:
    """Greedy generation with a key/value cache: the prompt in one pass, then one token a step.

    Every position goes through the attention projections and the gated MLP once; position ``i``
    attends to ``i + 1`` keys (``causal``; False counts the prompt's full square, as a kernel that
    masks rather than skips does). Logits are taken for the last prompt position and each new
    token but the last (the last one's logits end generation, counted too: ``new_tokens`` heads).
    """
    positions = prompt_tokens + new_tokens
    per_layer = linear_flops(positions, hidden, 4 * hidden) + mlp_flops(positions, hidden, intermediate, gated=True)
    if causal:
        pairs = positions * (positions + 1) // 2
    else:
        pairs = prompt_tokens * prompt_tokens + sum(prompt_tokens + i + 1 for i in range(new_tokens))
    per_layer += 2 * 2 * pairs * hidden
    return layers * per_layer + linear_flops(new_tokens, hidden, vocab)


def box_decoder_flops(frames: int = 8, phrases: int = 5, image_tokens: int = 1024, dim: int = 256,
                      depth: int = 2, mlp_dim: int = 2048, downsample: int = 2, output_tokens: int = 5,
                      llm_dim: int = 4096) -> int:
    """LQ on the [DET] hidden states, SAM's two-way decoder once per frame (self-attention of the
    queries, token-to-image and image-to-token cross-attention at half width, the queries' MLP,
    a last token-to-image attention), then the box MLP and objectness head per (frame, phrase).
    ``output_tokens``: SAM's IoU and mask tokens that the released decoder keeps in the queries."""
    queries = phrases + output_tokens
    inner = dim // downsample
    block = (attention_flops(queries, queries, dim) + attention_flops(queries, image_tokens, dim, inner)
             + mlp_flops(queries, dim, mlp_dim) + attention_flops(image_tokens, queries, dim, inner))
    per_frame = depth * block + attention_flops(queries, image_tokens, dim, inner)
    heads = linear_flops(phrases, dim, dim) + linear_flops(phrases, dim, 4) + linear_flops(phrases, dim, 1)
    projector = linear_flops(phrases, llm_dim, llm_dim) + linear_flops(phrases, llm_dim, dim)
    return projector + frames * (per_frame + heads)


@dataclass(frozen=True)
class GroveFlops:
    """Forward FLOPs of one clip, by part."""

    global_tower: int
    grounding_tower: int
    language_model: int
    box_decoder: int

    @property
    def total(self) -> int:
        return self.global_tower + self.grounding_tower + self.language_model + self.box_decoder

    def seconds_per_clip(self, peak_flops: float, utilisation: float) -> float:
        """Time one clip needs at ``utilisation`` (model FLOPs utilisation) of ``peak_flops``."""
        return self.total / (peak_flops * utilisation)


def grove_flops(frames: int = 8, prompt_text_tokens: int = 110, video_tokens: int = 576, new_tokens: int = 64,
                phrases: int = 5) -> GroveFlops:
    """The released GROVE's forward FLOPs for one clip of ``frames`` frames (configs/official/grove.yaml).

    ``prompt_text_tokens``: the chat template's system text, the overview sentence and the question
    (about 110 LLaMA tokens for llava_v1); ``new_tokens``: the caption (greedy, at most 64);
    ``phrases``: grounded phrases, i.e. [DET] queries per clip.
    """
    return GroveFlops(
        global_tower=clip_tower_flops(frames=frames, pooled_tokens=video_tokens),
        grounding_tower=sam_tower_flops(frames=frames),
        language_model=llama_flops(prompt_text_tokens + video_tokens, new_tokens),
        box_decoder=box_decoder_flops(frames=frames, phrases=phrases),
    )


@dataclass(frozen=True)
class ClipPredictFlops:
    """Forward FLOPs of ``cli.py predict`` on one whole clip (``predict_clips``), by step.

    ``caption``: the global tower on the T caption frames, the prompt pass and greedy generation;
    ``windows``: per window the global tower, the LLM's one pass over prompt and caption (no logits),
    the grounding tower and the box decoder, times ``num_windows``, less the global tower of the
    ``reused_windows`` windows that show exactly the caption's frames (their video tokens are the caption's)."""

    grid_frames: int
    num_windows: int
    caption: int
    per_window: GroveFlops
    reused_windows: int = 0

    @property
    def windows(self) -> int:
        return self.num_windows * self.per_window.total - self.reused_windows * self.per_window.global_tower

    @property
    def total(self) -> int:
        return self.caption + self.windows

    def seconds_per_clip(self, peak_flops: float, utilisation: float) -> float:
        """Time one whole clip needs at ``utilisation`` (model FLOPs utilisation) of ``peak_flops``."""
        return self.total / (peak_flops * utilisation)


def predict_windows(grid_frames: int, frames: int = 8, window_mode: str = "interleaved") -> int:
    """Windows ``Grove.predict`` runs on a clip of ``grid_frames`` frames (models.grove.windows.batch_windows)."""
    if window_mode in ("interleaved", "contiguous"):
        return -(-grid_frames // frames)
    if window_mode in ("official", "official_pointing"):
        if grid_frames < frames:
            return grid_frames if window_mode == "official" else 1
        size, remainder = divmod(grid_frames, frames)
        return size + remainder
    raise ValueError(f"unknown window_mode {window_mode!r}")


def grove_clip_flops(grid_frames: int = 40, frames: int = 8, prompt_text_tokens: int = 110, video_tokens: int = 576,
                     new_tokens: int = 64, phrases: int = 5, window_mode: str = "interleaved",
                     sizes: dict | None = None) -> ClipPredictFlops:
    """The whole predict path of one clip of ``grid_frames`` grid frames (40: an 8-s clip at 5 fps).

    ``Grove.predict`` (GROVE paper, supp. C) captions the clip once from T = ``frames`` frames, then
    grounds the caption window by window: every window runs both towers on its T frames, the LLM's
    prompt pass (prompt, video tokens and the ``new_tokens``-token tagged caption, hidden states
    only) and the box decoder. ``sizes`` overrides the part functions' sizes for a smaller model:
    keys ``clip``, ``sam``, ``llama``, ``box`` (dicts of their keyword arguments).
    """
    sizes = sizes or {}
    clip, sam, llama, box = (dict(sizes.get(k) or {}) for k in ("clip", "sam", "llama", "box"))
    global_tower = clip_tower_flops(frames=frames, pooled_tokens=video_tokens, **clip)
    prompt = prompt_text_tokens + video_tokens
    caption = global_tower + llama_flops(prompt, new_tokens, **llama)
    grounding_pass = {k: v for k, v in llama.items() if k != "vocab"}
    per_window = GroveFlops(
        global_tower=global_tower,
        grounding_tower=sam_tower_flops(frames=frames, **sam),
        language_model=llama_flops(prompt + new_tokens, 0, **grounding_pass),
        box_decoder=box_decoder_flops(frames=frames, phrases=phrases, **box),
    )
    return ClipPredictFlops(grid_frames, predict_windows(grid_frames, frames, window_mode), caption, per_window,
                            caption_windows(grid_frames, frames, window_mode))


def caption_windows(grid_frames: int, frames: int = 8, window_mode: str = "interleaved") -> int:
    """How many of a clip's windows show exactly the frames its caption is generated from (0 or 1):
    ``Grove.predict`` runs the global tower on those frames once. The official schedule captions from
    one of its windows; the others caption from the segment centres (``centre_frames``), which are
    one interleaved window when the grid divides evenly (the third of a 40-frame clip)."""
    from models.grove.frame_sampling import centre_frames
    from models.grove.windows import clip_windows

    positions, keep, caption = clip_windows(grid_frames, frames, window_mode)
    if caption is not None:
        return 1
    wanted = centre_frames(grid_frames, frames)
    return int(any(list(map(int, row)) == list(map(int, wanted)) for row in positions.tolist()))
