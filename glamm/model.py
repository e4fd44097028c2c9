"""GLaMM's grounded caption generation (GCG) as one plain nn.Module (GLaMM paper; its released code).

GLaMM is GROVE's image ancestor: GROVE without adapters and with SAM's own mask path. A frame goes
through CLIP ViT-L/14-336 (penultimate block, 576 patch tokens) and LLaVA's projector into a
LLaMA, which writes a caption where each grounded phrase reads ``<p> phrase </p> [SEG]``. The
LLM's last hidden state at the token just before each ``[SEG]`` is projected (``text_hidden_fcs``)
into a SAM prompt; SAM's image encoder (1024 px), prompt encoder and mask decoder turn it into a
mask, upsampled to the frame's size. Boxes are the masks' tight boxes (the mask-to-box rule of the
HowToGround1M annotation: logits > 0, then ``[x_min, y_min, x_max, y_max]`` over the foreground
pixels, inclusive indices as ``torchvision.ops.masks_to_boxes``; an empty mask gives no box).

The parts are built from the project's modules: :class:`GlobalVideoEncoder` (no adapters, one
frame, identity pooling), :class:`GroundingVideoEncoder` (no adapters), :class:`GroveLanguageModel`
(GLaMM's 32,007-token vocabulary), :class:`QueryProjector`, and segment_anything's
``PromptEncoder``/``MaskDecoder``. Weights load from the released folder through
:mod:`glamm.checkpoint` (``GLAMM_LAYOUT``); the CLIP tower, which the release does not
hold, from OpenAI's CLIP weights.

GLaMM's tokenization differs from the current transformers': under the version GLaMM pinned
(transformers@cae78c46, 4.31.0.dev0), the slow LLaMA tokenizer splits text at added tokens and
strips the whitespace on both sides of each, so ``</p> [SEG]`` is ``</p>``, ``[SEG]`` and the
``[SEG]`` query is read at ``</p>``. :func:`glamm_encode` reproduces that rule for any tokenizer.
"""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility before segment_anything imports it)

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from segment_anything.modeling import MaskDecoder, PromptEncoder, TwoWayTransformer
from torch import Tensor, nn

from glamm.checkpoint import load_glamm_state
from models.grove.configuration import (
    DecoderConfig,
    GlobalEncoderConfig,
    GroundingEncoderConfig,
    LanguageModelConfig,
    model_configs_from_yaml,
)
from models.grove.global_video_encoder import GlobalVideoEncoder
from models.grove.grounding_video_encoder import GroundingVideoEncoder
from models.grove.heads import QueryProjector
from models.grove.image_processing import preprocess_global, preprocess_grounding
from models.grove.language_model import GroveLanguageModel, load_tokenizer_folder
from models.grove.modeling import gather_det_hidden
from models.grove.prompting import CHAT_TEMPLATES, OFFICIAL_VIDEO_INDEX, PHRASE_END, PHRASE_START, parse_tagged_text

SEG_TOKEN = "[SEG]"
GLAMM_TOKENS = ("<im_start>", "<im_end>", "<bbox>", "<point>", SEG_TOKEN, PHRASE_START, PHRASE_END)
IMAGE_PLACEHOLDER = "<image>"
IMAGE_PREAMBLE = f"The <im_start>{IMAGE_PLACEHOLDER}<im_end> provides an overview of the picture.\n"
# The question GLaMM's GCG evaluation script (eval/gcg/infer.py) really sends: its string literal
# continues over a line break with a backslash, which keeps the space before the backslash and the
# next line's four spaces of indentation, so "interleaved" and "segmentation" are five spaces apart
# (one "▁▁▁▁" token more than a single space on the LLaMA vocabulary).
GCG_QUESTION = ("Could you please give me a detailed description of the image? Please respond with interleaved "
                "    segmentation masks for the corresponding parts of the answer.")
ROOT = Path(__file__).resolve().parent.parent
GLAMM_CONFIG = ROOT / "configs" / "official" / "glamm.yaml"
_MASK_SIZE_FACTOR = 4  # SAM's low-res masks are 4x its embedding grid


def glamm_encode(tokenizer, text: str) -> list[int]:
    """Token ids of ``text`` as GLaMM's slow LLaMA tokenizer (transformers 4.31.0.dev0) gives them.

    The text is split at the tokenizer's added tokens (GLaMM's seven, ``<s>``, ``</s>``, ``<unk>``);
    whitespace on both sides of each added token is stripped and empty pieces vanish; every other
    piece is encoded on its own (sentencepiece adds its word-start marker to each). So
    ``"</p> [SEG]"`` gives ``</p>``, ``[SEG]`` with nothing between them.
    """
    added = sorted(tokenizer.get_added_vocab(), key=len, reverse=True)
    if not added:
        return tokenizer(text, add_special_tokens=False)["input_ids"]
    pieces = re.split("(" + "|".join(re.escape(t) for t in added) + ")", text)
    special = set(added)
    for i, piece in enumerate(pieces):
        if piece in special:
            if i > 0 and pieces[i - 1] not in special:
                pieces[i - 1] = pieces[i - 1].rstrip()
            if i + 1 < len(pieces) and pieces[i + 1] not in special:
                pieces[i + 1] = pieces[i + 1].lstrip()
    ids: list[int] = []
    for piece in pieces:
        if not piece:
            continue
        if piece in special:
            ids.append(tokenizer.convert_tokens_to_ids(piece))
        else:
            ids.extend(tokenizer(piece, add_special_tokens=False)["input_ids"])
    return ids


def masks_to_boxes(masks: Tensor) -> tuple[Tensor, Tensor]:
    """Tight ``(x_min, y_min, x_max, y_max)`` boxes (inclusive pixel indices) of boolean masks
    ``(..., H, W)``, and whether each mask has any pixel (an empty mask's box is zeros)."""
    h, w = masks.shape[-2:]
    rows, cols = masks.any(dim=-1), masks.any(dim=-2)
    found = rows.any(dim=-1)
    ys = torch.arange(h, device=masks.device)
    xs = torch.arange(w, device=masks.device)
    y_min = torch.where(rows, ys, h).amin(dim=-1)
    y_max = torch.where(rows, ys, -1).amax(dim=-1)
    x_min = torch.where(cols, xs, w).amin(dim=-1)
    x_max = torch.where(cols, xs, -1).amax(dim=-1)
    boxes = torch.stack((x_min, y_min, x_max, y_max), dim=-1).float()
    return torch.where(found.unsqueeze(-1), boxes, 0.0), found


@dataclass
class GroundedFrame:
    """GCG output for one frame: ``caption`` without tags, ``tagged_caption`` with ``<p>..</p>``,
    and per phrase (in order): ``mask_logits (P, H, W)``, ``masks (P, H, W)`` bool, ``boxes (P, 4)``
    pixel xyxy and ``has_box (P,)`` (False for an empty mask, whose box is zeros)."""

    caption: str
    tagged_caption: str
    phrases: list[str]
    mask_logits: Tensor
    masks: Tensor
    boxes: Tensor
    has_box: Tensor


def glamm_part_configs(configs: dict) -> dict:
    """GLaMM's part configs from GROVE-style ones: no adapters, one frame's 24 x 24 tokens unpooled,
    SAM at its native size, GLaMM's vocabulary and ``[SEG]`` rule."""
    ge: GlobalEncoderConfig = configs["global_encoder"]
    gr: GroundingEncoderConfig = configs["grounding_encoder"]
    lm: LanguageModelConfig = configs["language_model"]
    return {"global_encoder": replace(ge, adapters=False), "grounding_encoder": replace(gr, adapters=False),
            "language_model": replace(lm, special_tokens="glamm", query_token="before_det", lora_r=0),
            "decoder": configs["decoder"]}


# LlamaConfig settings a GLaMM folder's config.json fixes for the LLM (the architecture's numbers and
# its normalisation, activation and rotary settings).
FOLDER_LLM_SETTINGS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                       "num_key_value_heads", "vocab_size", "max_position_embeddings", "rms_norm_eps", "hidden_act",
                       "rope_theta", "rope_scaling", "attention_bias", "tie_word_embeddings")


def llm_config_from_folder(folder: str | Path, config: LanguageModelConfig, source: str) -> LanguageModelConfig:
    """``config`` with the LLM settings of ``folder/config.json`` filled in where the YAML (``source``)
    leaves them out; a setting both give with different values is an error naming both."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        return config
    try:
        folder_config = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    yaml_settings = dict(config.llama_config or {})
    merged, clashes = dict(yaml_settings), []
    for key in FOLDER_LLM_SETTINGS:
        if key not in folder_config:
            continue
        value = folder_config[key]
        if key not in yaml_settings:
            merged[key] = value
        elif not _same_setting(yaml_settings[key], value):
            clashes.append(f"{key}: {value!r} in {path}, {yaml_settings[key]!r} in {source}")
    if clashes:
        raise ValueError(f"{folder}: the folder's config.json and the YAML disagree on the LLM "
                         f"(model.language_model.llama_config): " + "; ".join(clashes))
    return replace(config, llama_config=merged)


def _same_setting(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b)
    return a == b


class GLaMM(nn.Module):
    """GLaMM for grounded caption generation, built from four part configs (``configs/official/glamm.yaml``)."""

    def __init__(self, global_encoder: GlobalEncoderConfig, grounding_encoder: GroundingEncoderConfig,
                 language_model: LanguageModelConfig, decoder: DecoderConfig, tokenizer=None,
                 template: str = "llava_v1", question: str = GCG_QUESTION):
        super().__init__()
        parts = glamm_part_configs({"global_encoder": global_encoder, "grounding_encoder": grounding_encoder,
                                    "language_model": language_model, "decoder": decoder})
        self.language_model = GroveLanguageModel(parts["language_model"], tokenizer=tokenizer)
        llm_dim = self.language_model.hidden_size
        self.global_encoder = GlobalVideoEncoder(parts["global_encoder"], llm_dim)
        side = self.global_encoder.config.image_size // self.global_encoder.backbone.conv1.weight.shape[-1]
        if tuple(self.global_encoder.pool_grid) != (1, side, side):
            raise ValueError(f"model.global_encoder.pool_grid must be [1, {side}, {side}] for GLaMM (every patch "
                             f"token of one frame), got {list(self.global_encoder.pool_grid)}")
        self.grounding_encoder = GroundingVideoEncoder(parts["grounding_encoder"])
        sam = parts["grounding_encoder"]
        if sam.image_size != sam.pretrain_image_size:
            raise ValueError("model.grounding_encoder: GLaMM runs SAM at its own size (image_size == "
                             "pretrain_image_size)")
        dim = decoder.dim
        grid = sam.image_size // 16
        self.query_projector = QueryProjector(llm_dim, dim)
        self.prompt_encoder = PromptEncoder(embed_dim=dim, image_embedding_size=(grid, grid),
                                            input_image_size=(sam.image_size, sam.image_size), mask_in_chans=16)
        self.mask_decoder = MaskDecoder(
            num_multimask_outputs=3, transformer_dim=dim, iou_head_depth=3, iou_head_hidden_dim=dim,
            transformer=TwoWayTransformer(depth=decoder.depth, embedding_dim=dim, mlp_dim=decoder.mlp_dim,
                                          num_heads=decoder.num_heads))
        self.image_size = sam.image_size
        self.clip_size = self.global_encoder.config.image_size
        self.template, self.question = template, question
        self.seg_token_id = self.language_model.det_token_id

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def from_folder(cls, folder: str | Path, clip_dir: str | Path | None = None,
                    tokenizer_dir: str | Path | None = None,
                    config: str | Path | list[str | Path] = GLAMM_CONFIG, device: str | torch.device = "cpu",
                    dtype: torch.dtype | None = None) -> "GLaMM":
        """GLaMM from a released checkpoint folder (``config.json``, shards, tokenizer files) plus
        OpenAI's CLIP ViT-L/14-336 (``clip_dir``: a file or folder ``global_encoder.checkpoint``
        accepts). The LLM's settings (``rms_norm_eps``, sizes, rotary) come from the folder's
        ``config.json`` where the YAML leaves them out; a disagreement is an error naming both
        values (:func:`llm_config_from_folder`). The tokenizer is read from ``tokenizer_dir``
        (default: ``folder``). Raises naming every key of the folder that is unaccounted for,
        missing or of the wrong shape."""
        paths = config if isinstance(config, (list, tuple)) else [config]
        parts = glamm_part_configs(model_configs_from_yaml(list(paths)))
        parts["language_model"] = llm_config_from_folder(folder, parts["language_model"], ", ".join(map(str, paths)))
        tokenizer = load_tokenizer_folder(tokenizer_dir or folder, "tokenizer_dir" if tokenizer_dir else "GLaMM folder")
        with torch.device("meta"):  # no memory for weights that the folder fills
            model = cls(**{**parts, "global_encoder": replace(parts["global_encoder"], checkpoint=None)},
                        tokenizer=tokenizer)
        # CLIP is not in the release: the tower is built (and its weights read) for real
        model.global_encoder = GlobalVideoEncoder(
            replace(model.global_encoder.config, checkpoint=None if clip_dir is None else str(clip_dir)),
            model.language_model.hidden_size)
        state, report = load_glamm_state(folder, model.state_dict())
        if not report.ok:
            raise ValueError(f"{folder}: does not match the GLaMM of {', '.join(map(str, paths))}:\n{report.table()}")
        model.load_state_dict(state, strict=False, assign=True)
        model.reset_buffers()
        left = [name for name, t in (*model.named_parameters(), *model.named_buffers()) if t.is_meta]
        if left:
            raise ValueError(f"{folder}: no weights for {left[:5]}{'...' if len(left) > 5 else ''}")
        if dtype is not None:
            model = model.to(dtype)
        return model.to(device).eval()

    def reset_buffers(self) -> None:
        """Recompute the non-persistent buffers a meta-device build leaves empty (LLaMA's rotary
        frequencies, which checkpoints do not hold)."""
        for module in self.modules():
            if isinstance(getattr(module, "inv_freq", None), Tensor) and module.inv_freq.is_meta:
                inv_freq, module.attention_scaling = module.compute_default_rope_parameters(module.config)
                module.register_buffer("inv_freq", inv_freq, persistent=False)
                module.register_buffer("original_inv_freq", inv_freq.clone(), persistent=False)

    # -- text --------------------------------------------------------------------------------------
    @property
    def tokenizer(self):
        return self.language_model.tokenizer

    @property
    def num_image_tokens(self) -> int:
        return self.global_encoder.num_video_tokens

    def prompt_ids(self) -> list[int]:
        """BOS + GLaMM's GCG prompt, with one image placeholder per image token."""
        text = CHAT_TEMPLATES[self.template].format(user=IMAGE_PREAMBLE + self.question)
        before, after = text.split(IMAGE_PLACEHOLDER, 1)
        tok = self.tokenizer
        return [tok.bos_token_id, *glamm_encode(tok, before), *[OFFICIAL_VIDEO_INDEX] * self.num_image_tokens,
                *glamm_encode(tok, after)]

    def answer_ids(self, caption: str) -> list[int]:
        """A caption in GLaMM's answer format (``<p> phrase </p> [SEG]``), tokenized as GLaMM does, plus EOS."""
        text = re.sub(r"<p>\s*(.*?)\s*</p>\s*(\[SEG\])?", lambda m: f"<p> {m.group(1)} </p> {SEG_TOKEN}",
                      caption.replace(SEG_TOKEN, " ") if "<p>" in caption else caption)
        return glamm_encode(self.tokenizer, " " + re.sub(r"\s+", " ", text).strip()) + [self.tokenizer.eos_token_id]

    def decode(self, ids: list[int]) -> tuple[str, str, list[str]]:
        """Generated ids -> ``(tagged caption, caption, phrases)``; the i-th phrase goes with the i-th [SEG]."""
        tok = self.tokenizer
        text = tok.decode([i for i in ids if i >= 0], skip_special_tokens=False)
        drop = tuple(t for t in (tok.eos_token, tok.bos_token, tok.pad_token, tok.unk_token, SEG_TOKEN) if t)
        return parse_tagged_text(text, drop=drop)

    # -- parts -------------------------------------------------------------------------------------
    def encode_images(self, frames: np.ndarray | Tensor) -> tuple[Tensor, Tensor]:
        """uint8 frames ``(N, H, W, 3)`` -> image tokens for the LLM ``(N, 576, llm_dim)`` and SAM's
        image embeddings ``(N, C, 64, 64)`` (the real sizes)."""
        device = self.query_projector[0].weight.device
        clip = preprocess_global(frames, self.clip_size, mode="clip").to(device)
        # SAM's ResizeLongestSide on the 8-bit frames (PIL bilinear), as GLaMM's inference resizes
        sam = preprocess_grounding(frames, self.image_size, mode="sam").to(device)
        tokens = self.global_encoder(clip.unsqueeze(1))
        embeddings = self.grounding_encoder(sam.unsqueeze(1))[:, 0]
        return tokens, embeddings

    def generate_ids(self, image_tokens: Tensor, max_new_tokens: int = 512) -> list[list[int]]:
        """Greedy answers (EOS excluded) for each image; GLaMM decodes greedily, one beam."""
        prompt = torch.tensor(self.prompt_ids(), device=image_tokens.device)
        ids = prompt.unsqueeze(0).expand(image_tokens.shape[0], -1)
        return self.language_model.generate(image_tokens, ids, torch.ones_like(ids), max_new_tokens=max_new_tokens)

    def llm_pass(self, image_tokens: Tensor, answers: list[list[int]]) -> tuple[Tensor, Tensor]:
        """One teacher-forced LLM pass over prompt + answer ids -> ``(hidden (N, L, D), input_ids (N, L))``.

        GLaMM generates without a KV cache and reads the [SEG] states from the last step's full
        forward, which is this pass over the final sequence."""
        prompt = self.prompt_ids()
        rows = [prompt + list(a) for a in answers]
        length = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(rows), length), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), length), dtype=torch.long)
        for i, row in enumerate(rows):  # a handful of frames; tensors are built once per batch
            ids[i, :len(row)] = torch.tensor(row)
            mask[i, :len(row)] = 1
        ids, mask = ids.to(image_tokens.device), mask.to(image_tokens.device)
        _, hidden = self.language_model(ids, mask, image_tokens)
        return hidden, ids

    def seg_queries(self, hidden: Tensor, input_ids: Tensor) -> tuple[Tensor, Tensor]:
        """Prompts for SAM: ``text_hidden_fcs`` of the hidden state just before each [SEG],
        ``(N, P, dim)`` in order, and the [SEG] count per sequence."""
        mask = self.language_model.query_mask(input_ids)
        num_slots = int(mask.sum(dim=1).max()) if mask.numel() else 0
        slots, count = gather_det_hidden(hidden, mask, num_slots)
        return self.query_projector(slots.to(self.query_projector[0].weight.dtype)), count

    def decode_masks(self, image_embeddings: Tensor, queries: Tensor, count: Tensor,
                     original_hw: tuple[int, int]) -> Tensor:
        """SAM's mask path for every (frame, query) pair at once -> logits ``(N, P, H, W)`` at the
        frames' size (padded query slots give -inf). Sparse prompt = the query, dense prompt =
        ``no_mask_embed``, single-mask output (the first mask token), upsampled as SAM's
        ``postprocess_masks``: to the SAM input size, cropped to the resized frame, to the original size."""
        n, p = queries.shape[:2]
        h, w = original_hw
        out = torch.full((n, p, h, w), float("-inf"), device=queries.device)
        valid = torch.arange(p, device=queries.device).unsqueeze(0) < count.unsqueeze(1)
        frame_index, slot = valid.nonzero(as_tuple=True)
        if frame_index.numel() == 0:
            return out
        dec = self.mask_decoder
        sparse = queries[frame_index, slot].unsqueeze(1).to(dec.iou_token.weight.dtype)  # (Q, 1, C)
        lead = torch.cat((dec.iou_token.weight, dec.mask_tokens.weight), dim=0)
        tokens = torch.cat((lead.unsqueeze(0).expand(sparse.shape[0], -1, -1), sparse), dim=1)
        dense = self.prompt_encoder.no_mask_embed.weight.reshape(1, -1, 1, 1)
        src = image_embeddings[frame_index].to(dense.dtype) + dense
        pe_layer = self.prompt_encoder.pe_layer
        if pe_layer.positional_encoding_gaussian_matrix.dtype != torch.float32:
            pe_layer.float()  # SAM builds its coordinate grid in fp32: keep its Fourier matrix fp32 (bf16 models)
        pos = self.prompt_encoder.get_dense_pe().to(src.dtype).expand(src.shape[0], -1, -1, -1)
        b, c, gh, gw = src.shape
        hs, src = dec.transformer(src, pos, tokens)
        mask_token = hs[:, 1]  # multimask_output=False: the first mask token
        upscaled = dec.output_upscaling(src.transpose(1, 2).reshape(b, c, gh, gw))
        hyper = dec.output_hypernetworks_mlps[0](mask_token)
        low = (hyper.unsqueeze(1) @ upscaled.flatten(2)).reshape(b, 1, *upscaled.shape[-2:])
        scale = self.image_size / max(h, w)
        rh, rw = int(h * scale + 0.5), int(w * scale + 0.5)
        full = F.interpolate(low.float(), (self.image_size, self.image_size), mode="bilinear", align_corners=False)
        full = F.interpolate(full[..., :rh, :rw], (h, w), mode="bilinear", align_corners=False)
        out[frame_index, slot] = full[:, 0]
        return out

    # -- whole model -------------------------------------------------------------------------------
    @torch.no_grad()
    def ground(self, frames: np.ndarray | Tensor, captions: list[str] | None = None,
               max_new_tokens: int = 512) -> list[GroundedFrame]:
        """Grounded captions of uint8 frames ``(N, H, W, 3)`` (one size per call).

        ``captions`` (``<p>phrase</p>`` tagged) are grounded instead of generated (teacher forcing).
        """
        frames = torch.from_numpy(np.array(frames)) if not isinstance(frames, Tensor) else frames
        if frames.dim() != 4 or frames.shape[-1] != 3 or frames.dtype != torch.uint8:
            raise ValueError(f"frames must be uint8 (N, H, W, 3), got {frames.dtype} {tuple(frames.shape)}")
        if captions is not None and len(captions) != frames.shape[0]:
            raise ValueError(f"{len(captions)} captions for {frames.shape[0]} frames")
        image_tokens, embeddings = self.encode_images(frames)
        if captions is None:
            answers = self.generate_ids(image_tokens, max_new_tokens)
        else:
            answers = [self.answer_ids(c)[:-1] for c in captions]
        hidden, ids = self.llm_pass(image_tokens, answers)
        queries, count = self.seg_queries(hidden, ids)
        logits = self.decode_masks(embeddings, queries, count, tuple(frames.shape[1:3]))
        masks = logits > 0
        boxes, found = masks_to_boxes(masks)
        out = []
        for i, answer in enumerate(answers):  # per-frame results: plain Python values
            tagged, caption, phrases = self.decode(answer)
            k = min(len(phrases), int(count[i]))
            out.append(GroundedFrame(caption, tagged, phrases[:k], logits[i, :k].cpu(), masks[i, :k].cpu(),
                                     boxes[i, :k].cpu(), found[i, :k].cpu()))
        return out


def build_on_meta(global_encoder: GlobalEncoderConfig, grounding_encoder: GroundingEncoderConfig,
                  language_model: LanguageModelConfig, decoder: DecoderConfig, tokenizer=None) -> GLaMM:
    """GLaMM on the meta device: shapes only, no memory, nothing loaded (checkpoint paths ignored)."""
    configs = (replace(global_encoder, checkpoint=None), replace(grounding_encoder, checkpoint=None),
               replace(language_model, path=None), replace(decoder, checkpoint=None))
    with torch.device("meta"):
        return GLaMM(*configs, tokenizer=tokenizer)


def frame_boxes(result: GroundedFrame) -> tuple[list[str], list[list[float]], list[float]]:
    """One frame's ``(labels, pixel xyxy boxes, scores)``: the phrases whose mask is not empty."""
    keep = result.has_box
    probs = result.mask_logits.float().sigmoid() * result.masks
    scores = probs.flatten(1).sum(dim=1) / result.masks.flatten(1).sum(dim=1).clamp(min=1)
    boxes = (result.boxes + torch.tensor([0.0, 0.0, 1.0, 1.0]))[keep]
    labels = [p for p, k in zip(result.phrases, keep.tolist()) if k]
    return labels, boxes.round(decimals=2).tolist(), scores[keep].round(decimals=4).tolist()


def ground_in_batches(model: GLaMM, frames: np.ndarray, batch_size: int, captions: list[str] | None = None,
                      max_new_tokens: int = 512) -> list[GroundedFrame]:
    """``model.ground`` over ``frames`` in batches of ``batch_size`` (bounded memory on long clips)."""
    out: list[GroundedFrame] = []
    for start in range(0, len(frames), batch_size):
        part = None if captions is None else captions[start:start + batch_size]
        out.extend(model.ground(frames[start:start + batch_size], captions=part, max_new_tokens=max_new_tokens))
    return out


__all__ = ["GLaMM", "llm_config_from_folder", "frame_boxes", "ground_in_batches", "build_on_meta", "GroundedFrame",
           "glamm_encode", "masks_to_boxes", "GLAMM_TOKENS", "SEG_TOKEN", "GCG_QUESTION"]
