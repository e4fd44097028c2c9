"""GROVE: grounded video caption generation (GROVE paper, section 4 and supp. C), as one nn.Module.

Global video encoder -> VL -> LLM (caption with ``<p> phrase </p> [DET]``) -> LQ on the [DET]
hidden states -> box decoder over every frame's grounding features -> box and temporal-objectness
heads. The training step (losses, freezing policy, logging) lives in the LightningModule; this
module only computes. The pieces are also exposed separately so inference can generate a caption
once, run the caption-forced LLM pass once, and decode boxes for several windows of frames.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import Tensor, nn

from models.grove.box_decoder import BoxDecoder
from models.grove.configuration import DecoderConfig, GlobalEncoderConfig, GroundingEncoderConfig, LanguageModelConfig
from models.grove.global_video_encoder import GlobalVideoEncoder
from models.grove.grounding_video_encoder import GroundingVideoEncoder
from models.grove.heads import BoxHead, QueryProjector, TemporalObjectnessHead
from models.grove.language_model import GroveLanguageModel
from models.grove.prompting import RELEASED_TEXT_PROTOCOLS, GroundedCaptionPrompter, format_target, official_answer_text
from models.grove.windows import batch_windows, window_pairs

# How generated text becomes the ids that are grounded (Grove.predict).
TEXT_PROTOCOLS = ("project", *RELEASED_TEXT_PROTOCOLS)

# Parameter groups of configure_trainable, and the paper's default choice (supp. C).
# ``grounding_rel_pos``: the relative position tables of SAM's global-attention blocks, which the
# released GROVE fine-tunes together with the absolute positional embedding.
PARAMETER_GROUPS = ("global_backbone", "global_adapters", "vision_projector", "grounding_backbone",
                    "grounding_pos_embed", "grounding_rel_pos", "grounding_adapters", "llm_blocks", "llm_embeddings",
                    "llm_lora", "query_projector", "box_decoder", "heads")
PAPER_TRAINABLE = ("global_adapters", "vision_projector", "grounding_pos_embed", "grounding_adapters",
                   "llm_embeddings", "llm_lora", "query_projector", "box_decoder", "heads")


@dataclass
class GrovePrediction:
    """Full-clip predictions: ``boxes (B, N, P, 4)`` normalised ``(cx, cy, w, h)`` on every frame of
    the clip, ``scores (B, N, P)`` objectness probabilities (1 without an objectness head);
    ``captions``: the plain captions to score where the text protocol fixes them (else None:
    the tagged captions without their tags); ``answers``: the decoded answers of a released text
    protocol as the released code holds them (EOS kept; else None)."""

    tagged_captions: list[str]
    phrases: list[list[str]]
    boxes: Tensor
    scores: Tensor
    captions: list[str] | None = None
    answers: list[str] | None = None


@dataclass
class GroveOutput:
    """``boxes`` are normalised ``(cx, cy, w, h)``; ``num_det`` counts the [DET] tokens per sequence."""

    lm_loss: Tensor | None
    boxes: Tensor
    objectness_logits: Tensor | None
    num_det: Tensor


def gather_det_hidden(hidden: Tensor, det_mask: Tensor, num_slots: int) -> tuple[Tensor, Tensor]:
    """Hidden states at [DET] tokens into ``(B, num_slots, D)`` slots in order of appearance.

    The k-th [DET] of a sequence fills slot k (cumsum of the mask); [DET]s beyond ``num_slots`` are
    dropped, missing ones leave zero slots. Returns the slots and the [DET] count per sequence.
    """
    b, _, d = hidden.shape
    slot = det_mask.long().cumsum(dim=1) - 1
    keep = det_mask & (slot < num_slots)
    batch_index = torch.arange(b, device=hidden.device).unsqueeze(1).expand_as(det_mask)
    slots = hidden.new_zeros(b, num_slots, d)
    slots = slots.index_put((batch_index[keep], slot[keep]), hidden[keep])
    return slots, det_mask.sum(dim=1)


class Grove(nn.Module, PyTorchModelHubMixin, library_name="grove", tags=["grounded-video-captioning"]):
    """The GROVE model built from its four configurations.

    ``save_pretrained`` / ``from_pretrained`` / ``push_to_hub`` (huggingface_hub's mixin) write and
    read a self-contained folder (:mod:`models.grove.pretrained`): config.json, safetensors
    weights, the tokenizer, the preprocessing and inference settings and a model card.
    """

    def __init__(self, global_encoder: GlobalEncoderConfig, grounding_encoder: GroundingEncoderConfig,
                 language_model: LanguageModelConfig, decoder: DecoderConfig, tokenizer=None):
        super().__init__()
        self.language_model = GroveLanguageModel(language_model, tokenizer=tokenizer)
        llm_dim = self.language_model.hidden_size
        self.global_encoder = GlobalVideoEncoder(global_encoder, llm_dim)
        self.grounding_encoder = GroundingVideoEncoder(grounding_encoder)
        if self.grounding_encoder.out_chans != decoder.dim:
            raise ValueError(f"model.grounding_encoder out_chans ({self.grounding_encoder.out_chans}) must equal "
                             f"model.decoder.dim ({decoder.dim})")
        self.query_projector = QueryProjector(llm_dim, decoder.dim)
        self.box_decoder = BoxDecoder(decoder)
        self.box_head = BoxHead(decoder.dim)
        self.objectness_head = TemporalObjectnessHead(decoder.dim) if decoder.use_objectness else None
        self._prompter: GroundedCaptionPrompter | None = None
        # what an exported folder carries besides the architecture (models.grove.pretrained.SETTINGS)
        self.settings: dict = {}

    # -- exported folders (huggingface_hub's ModelHubMixin) ---------------------------------------
    def _save_pretrained(self, save_directory) -> None:
        from models.grove.pretrained import save_grove

        save_grove(self, save_directory)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, **kwargs) -> "Grove":
        """A GROVE from an exported folder or a hub repository id (local cache when offline).
        ``quantization="int8"``: weight-only 8-bit backbones (:mod:`models.grove.quantization`), applied last."""
        from models.grove.pretrained import pop_quantization, quantize_loaded, resolve_grove_folder

        quantization = pop_quantization(kwargs)
        folder = resolve_grove_folder(pretrained_model_name_or_path, kwargs)
        if Path(folder).is_dir():  # huggingface_hub reads config.json first, and would raise json's bare error
            from core.weights.pretrained_folder import check_config_file

            check_config_file(folder)
        return quantize_loaded(super().from_pretrained(str(folder), **kwargs), quantization)

    @classmethod
    def _from_pretrained(cls, *, model_id: str, map_location: str = "cpu", torch_dtype=None, dtype=None,
                         **_: object) -> "Grove":
        """``torch_dtype`` / ``dtype`` (``torch.bfloat16``, ``torch.float16``): build and load in that dtype."""
        from models.grove.pretrained import load_grove, model_dtype

        return load_grove(cls, model_id, map_location, dtype=model_dtype(dtype, torch_dtype))

    # -- text --------------------------------------------------------------------------------------
    @property
    def tokenizer(self):
        return self.language_model.tokenizer

    @property
    def num_video_tokens(self) -> int:
        return self.global_encoder.num_video_tokens

    def make_prompter(self, questions: list[str] | None = None, sample_question: bool = True,
                      template: str = "vicuna_v1", target_text: str = "as_is") -> GroundedCaptionPrompter:
        return GroundedCaptionPrompter(self.tokenizer, self.num_video_tokens, template=template,
                                       questions=questions, sample_question=sample_question,
                                       style=self.language_model.config.special_tokens, target_text=target_text)

    @property
    def prompter(self) -> GroundedCaptionPrompter:
        if self._prompter is None:
            self._prompter = self.make_prompter()
        return self._prompter

    @prompter.setter
    def prompter(self, value: GroundedCaptionPrompter) -> None:
        self._prompter = value

    # -- parts -------------------------------------------------------------------------------------
    def encode_video(self, global_frames: Tensor) -> Tensor:
        """Video tokens for the LLM: ``(B, N, llm_dim)``."""
        return self.global_encoder(global_frames)

    def encode_grounding(self, grounding_frames: Tensor) -> Tensor:
        """Grounding features ``(B, T, dim, h, w)``."""
        return self.grounding_encoder(grounding_frames)

    def det_queries(self, input_ids: Tensor, attention_mask: Tensor, video_embeds: Tensor,
                    labels: Tensor | None = None, num_slots: int | None = None) -> tuple[Tensor | None, Tensor, Tensor]:
        """LLM pass -> ``(lm_loss, queries (B, P, dim), num_det (B,))``.

        ``num_slots`` defaults to the largest [DET] count of the batch.
        """
        lm_loss, hidden = self.language_model(input_ids, attention_mask, video_embeds, labels)
        det_mask = self.language_model.query_mask(input_ids)
        if num_slots is None:
            num_slots = int(det_mask.sum(dim=1).max()) if det_mask.numel() else 0
        det_hidden, num_det = gather_det_hidden(hidden, det_mask, num_slots)
        # The LLM may run in bf16 while the projections stay fp32.
        det_hidden = det_hidden.to(self.query_projector[0].weight.dtype)
        return lm_loss, self.query_projector(det_hidden), num_det

    def decode_boxes(self, grounding_features: Tensor, queries: Tensor,
                     phrase_mask: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """``(B, T, C, h, w)`` x ``(B, P, dim)`` -> boxes ``(B, T, P, 4)``, objectness logits ``(B, T, P)``."""
        decoded = self.box_decoder(grounding_features, queries, phrase_mask)
        boxes = self.box_head(decoded)
        objectness = self.objectness_head(decoded) if self.objectness_head is not None else None
        return boxes, objectness

    # -- whole model -------------------------------------------------------------------------------
    def forward(self, global_frames: Tensor, grounding_frames: Tensor, input_ids: Tensor, attention_mask: Tensor,
                labels: Tensor | None = None, phrase_mask: Tensor | None = None) -> GroveOutput:
        video_embeds = self.encode_video(global_frames)
        num_slots = None if phrase_mask is None else phrase_mask.shape[1]
        lm_loss, queries, num_det = self.det_queries(input_ids, attention_mask, video_embeds, labels, num_slots)
        if phrase_mask is None:
            phrase_mask = torch.arange(queries.shape[1], device=queries.device).unsqueeze(0) < num_det.unsqueeze(1)
        boxes, objectness = self.decode_boxes(self.encode_grounding(grounding_frames), queries, phrase_mask)
        return GroveOutput(lm_loss=lm_loss, boxes=boxes, objectness_logits=objectness, num_det=num_det)

    @torch.no_grad()
    def generate_captions(self, global_frames: Tensor, max_new_tokens: int = 64,
                          video_embeds: Tensor | None = None) -> list[str]:
        """Greedy captions (the evaluation question), decoded with GROVE's tags kept."""
        if video_embeds is None:
            video_embeds = self.encode_video(global_frames)
        prompts = self.prompter.encode_prompts(video_embeds.shape[0])
        device = video_embeds.device
        ids = self.language_model.generate(video_embeds, prompts["input_ids"].to(device),
                                           prompts["attention_mask"].to(device), max_new_tokens=max_new_tokens)
        return [self.prompter.decode(seq) for seq in ids]

    @torch.no_grad()
    def predict(self, global_frames: Tensor, grounding_frames: Tensor, frame_mask: Tensor, window: int = 8,
                window_mode: str = "interleaved", caption_positions: Tensor | None = None,
                captions: list[str] | None = None, max_new_tokens: int = 64,
                text_protocol: str = "project", answers: list[str] | None = None,
                question: str | None = None, windows_per_pass: int | None = None) -> GrovePrediction:
        """Caption a clip and ground the caption on all of its frames (GROVE paper, supp. C).

        Args:
            global_frames / grounding_frames: ``(B, N, 3, H, W)`` preprocessed frames of the whole
                clip (N annotated frames; clips shorter than N are padded, see ``frame_mask``).
            frame_mask: ``(B, N)`` True on real frames.
            window: frames the model sees at once (T).
            window_mode: ``official``, ``interleaved`` or ``contiguous`` (see :mod:`models.grove.windows`).
            caption_positions: ``(B, T)`` frames to caption from, for the non-official modes
                (the official mode captions from its central window).
            captions: tagged captions to ground instead of generating (teacher forcing, VidSTG).
            max_new_tokens: greedy decoding budget (64 in the released code).
            text_protocol: how a generated caption becomes the ids grounded in each window.
                ``project``: decoded, parsed and re-formatted, the same ids for every window.
                ``official`` (the released inference, needs ``window_mode="official"``): the
                caption window is grounded on the generated ids themselves; the other windows
                on the released decode of them (:meth:`GroundedCaptionPrompter.official_answer`)
                re-tokenised; the caption scored is the released one (``official_answer_text``).
                ``package`` (the official inference package, also needs ``window_mode="official"``):
                the same, with the package's decode (:meth:`GroundedCaptionPrompter.decode_package`).
            answers: answers in the target format to ground as they are, without normalising
                (the pointing benchmarks' ``<p> caption </p> [DET]``); overrides ``captions``.
            question: the question asked before ``answers`` (default: the prompter's evaluation question).
            windows_per_pass: how many windows go through the model at once (default: as many as the
                batch has clips, so a pass holds what one window per clip holds). The windows of all
                the batch's clips are run as one list, so passes are full whatever the clips'
                lengths; a clip without phrases and the padding windows of shorter clips are not run.
        """
        if text_protocol not in TEXT_PROTOCOLS:
            raise ValueError(f"text_protocol must be one of {TEXT_PROTOCOLS}, got {text_protocol!r}")
        if text_protocol in RELEASED_TEXT_PROTOCOLS and window_mode != "official":
            raise ValueError(f"text_protocol={text_protocol!r} grounds the released caption window: it needs "
                             f"window_mode='official', got {window_mode!r}")
        if windows_per_pass is not None and int(windows_per_pass) < 1:
            raise ValueError(f"windows_per_pass must be a positive number of windows, got {windows_per_pass!r}")
        device = global_frames.device
        num_frames = frame_mask.sum(dim=1)
        positions, keep, official_caption, caption_window = batch_windows(num_frames, window, window_mode)
        clips = torch.arange(global_frames.shape[0], device=device).unsqueeze(1)
        plain = None
        central = None  # official protocol: (B,) caption window and its ids, grounded as generated
        released = None  # a released protocol's decoded answers
        captioned = None  # (caption frames (B, T), their video tokens): reused for a window of the same frames
        if answers is not None:
            parsed = [official_answer_text(a) for a in answers]
            tagged, phrases = [p[0] for p in parsed], [p[2] for p in parsed]
            enc = self.prompter.encode_training(answers, formatted=True, question=question)
        elif captions is not None:
            parsed = [self.prompter.parse_generated(format_target(c)) for c in captions]
            tagged, phrases = [p[0] for p in parsed], [p[2] for p in parsed]
            enc = self.prompter.encode_training(tagged)
        elif text_protocol in RELEASED_TEXT_PROTOCOLS:
            captioned = (official_caption, self.encode_video(global_frames[clips, official_caption]))
            answers, generated = self._generate_official(captioned[1], max_new_tokens, text_protocol)
            released = answers
            parsed = [official_answer_text(a) for a in answers]
            tagged, plain, phrases = [p[0] for p in parsed], [p[1] for p in parsed], [p[2] for p in parsed]
            enc = self.prompter.encode_training(answers, formatted=True)
            central = (caption_window, self.prompter.right_pad(generated, self.tokenizer.pad_token_id))
        else:
            caption_at = official_caption if official_caption is not None else caption_positions
            if caption_at is None:
                raise ValueError(f"window_mode={window_mode!r} needs caption_positions (B, T) to caption from")
            captioned = (caption_at.to(device), self.encode_video(global_frames[clips, caption_at]))
            texts = self.generate_captions(global_frames, max_new_tokens=max_new_tokens, video_embeds=captioned[1])
            parsed = [self.prompter.parse_generated(text) for text in texts]
            tagged, phrases = [p[0] for p in parsed], [p[2] for p in parsed]
            enc = self.prompter.encode_training(tagged)
        b, n = frame_mask.shape
        max_p = max((len(p) for p in phrases), default=0)
        boxes = global_frames.new_zeros(b, n, max_p, 4, dtype=torch.float32)
        scores = global_frames.new_ones(b, n, max_p, dtype=torch.float32)
        if max_p == 0:
            return GrovePrediction(tagged, phrases, boxes, scores, plain, released)
        ids, mask = enc["input_ids"].to(device), enc["attention_mask"].to(device)
        if central is not None:  # per clip, the ids of its caption window next to those of the others
            ids, mask, central = _with_central_ids(ids, mask, central, self.tokenizer.pad_token_id)
        num_phrases = torch.tensor([len(p) for p in phrases], device=device)
        phrase_mask = torch.arange(max_p, device=device).unsqueeze(0) < num_phrases.unsqueeze(1)
        pair_clips, pair_windows = window_pairs(keep, num_phrases > 0)
        per_pass = b if windows_per_pass is None else int(windows_per_pass)
        for start in range(0, pair_clips.numel(), per_pass):  # ceil(pairs / per_pass) passes
            pc, pw = pair_clips[start:start + per_pass], pair_windows[start:start + per_pass]
            pos = positions[pc, pw]  # (K, T)
            rows = pc if central is None else pc + b * (central[pc] == pw).long()  # the caption window's own ids
            win_boxes, win_logits = self._ground_windows(global_frames[pc.unsqueeze(1), pos],
                                                         grounding_frames[pc.unsqueeze(1), pos], ids[rows], mask[rows],
                                                         phrase_mask[pc], _reused_video(pos, pc, captioned))
            ki, ti = keep[pc, pw].nonzero(as_tuple=True)
            boxes[pc[ki], pos[ki, ti]] = win_boxes[ki, ti].float()
            if win_logits is not None:
                scores[pc[ki], pos[ki, ti]] = win_logits[ki, ti].float().sigmoid()
        real = phrase_mask[:, None, :] & frame_mask[:, :, None]  # padded phrases and frames: no box
        return GrovePrediction(tagged, phrases, boxes * real.unsqueeze(-1), scores * real, plain, released)

    def _ground_windows(self, global_frames: Tensor, grounding_frames: Tensor, input_ids: Tensor,
                        attention_mask: Tensor, phrase_mask: Tensor,
                        reused: tuple[Tensor, Tensor] | None) -> tuple[Tensor, Tensor | None]:
        """One model pass over K windows, each of its own clip: frames ``(K, T, 3, H, W)``, caption-forced
        ids ``(K, L)`` (right-padded) and ``phrase_mask (K, P)`` -> boxes ``(K, T, P, 4)``, logits ``(K, T, P)``.

        ``reused``: ``(mask (K,), video tokens (K, N, D))``, the windows whose video tokens were already
        computed (the caption's frames) and those tokens; the global tower runs on the others only."""
        if reused is None:
            video = self.encode_video(global_frames)
        else:
            use, tokens = reused
            fresh = (~use).nonzero(as_tuple=True)[0]
            video = tokens  # a gathered copy (_reused_video): written in place
            if fresh.numel():
                video[fresh] = self.encode_video(global_frames[fresh]).to(video.dtype)
        _, queries, _ = self.det_queries(input_ids, attention_mask, video, num_slots=phrase_mask.shape[1])
        return self.decode_boxes(self.encode_grounding(grounding_frames), queries, phrase_mask)

    def _generate_official(self, video: Tensor, max_new_tokens: int,
                           text_protocol: str = "official") -> tuple[list[str], list[list[int]]]:
        """Greedy answers from the caption window's video tokens: ``(answer texts as ``text_protocol``
        decodes them, prompt + generated ids)``."""
        prompts = self.prompter.encode_prompts(video.shape[0])
        generated = self.language_model.generate(video, prompts["input_ids"].to(video.device),
                                                 prompts["attention_mask"].to(video.device),
                                                 max_new_tokens=max_new_tokens, keep_eos=True)
        prompt = prompts["input_ids"][0].tolist()
        return ([self.prompter.released_answer(text_protocol, prompt, g) for g in generated],
                [prompt + g for g in generated])

    # -- trainable parameters ----------------------------------------------------------------------
    def parameter_groups(self) -> dict[str, list[tuple[str, nn.Parameter]]]:
        """Named parameters by role (see ``PARAMETER_GROUPS``); every parameter is in one group."""
        groups: dict[str, list[tuple[str, nn.Parameter]]] = {name: [] for name in PARAMETER_GROUPS}
        pos_embed = self.grounding_encoder.pos_embed
        rel_pos_ids = {id(p) for p in self.grounding_encoder.global_rel_pos_parameters()}
        embedding_ids = {id(p) for p in self.language_model.get_input_embeddings().parameters()}
        embedding_ids |= {id(p) for p in self.language_model.get_output_embeddings().parameters()}
        for name, param in self.named_parameters():
            if name.startswith("global_encoder.backbone."):
                group = "global_backbone"
            elif name.startswith("global_encoder.adapters."):
                group = "global_adapters"
            elif name.startswith("global_encoder.projector."):
                group = "vision_projector"
            elif param is pos_embed:
                group = "grounding_pos_embed"
            elif id(param) in rel_pos_ids:
                group = "grounding_rel_pos"
            elif name.startswith("grounding_encoder.backbone."):
                group = "grounding_backbone"
            elif name.startswith("grounding_encoder.adapters."):
                group = "grounding_adapters"
            elif name.startswith("language_model."):
                group = ("llm_embeddings" if id(param) in embedding_ids
                         else "llm_lora" if ".lora_" in name else "llm_blocks")
            elif name.startswith("query_projector."):
                group = "query_projector"
            elif name.startswith("box_decoder."):
                group = "box_decoder"
            elif name.startswith(("box_head.", "objectness_head.")):
                group = "heads"
            else:  # a new submodule must be assigned a group explicitly
                raise RuntimeError(f"parameter {name} belongs to no parameter group")
            groups[group].append((name, param))
        return groups

    def configure_trainable(self, trainable: Iterable[str] = PAPER_TRAINABLE) -> dict[str, int]:
        """Set ``requires_grad`` per group: the named groups train, all others freeze.

        Returns the number of trainable parameters per group.
        """
        trainable = set(trainable)
        unknown = trainable - set(PARAMETER_GROUPS)
        if unknown:
            raise ValueError(f"unknown parameter groups {sorted(unknown)}; choose from {PARAMETER_GROUPS}")
        counts = {}
        for group, params in self.parameter_groups().items():
            for _, param in params:
                param.requires_grad_(group in trainable)
            counts[group] = sum(p.numel() for _, p in params) if group in trainable else 0
        return counts


def _with_central_ids(ids: Tensor, mask: Tensor, central: tuple[Tensor, dict[str, Tensor]],
                      pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """The official protocol's two sets of ids in one table: rows ``0..B-1`` the re-tokenised answers
    (every window but the caption window), rows ``B..2B-1`` the generated ids (the caption window),
    right-padded to one length; and the caption window index ``(B,)``."""
    first_ids, first_mask = central[1]["input_ids"].to(ids.device), central[1]["attention_mask"].to(ids.device)
    length = max(first_ids.shape[1], ids.shape[1])

    def pad(x: Tensor, value: int) -> Tensor:
        return torch.nn.functional.pad(x, (0, length - x.shape[1]), value=value)

    return (torch.cat((pad(ids, pad_id), pad(first_ids, pad_id))), torch.cat((pad(mask, 0), pad(first_mask, 0))),
            central[0].to(ids.device))


def _reused_video(positions: Tensor, clips: Tensor, captioned: tuple[Tensor, Tensor] | None
                  ) -> tuple[Tensor, Tensor] | None:
    """Which of the windows ``positions (K, T)`` of ``clips (K,)`` show exactly their clip's caption frames,
    and the caption's video tokens for every window (to be replaced where they do not): the global tower
    then runs once on those frames (the official mode always captions from one of its windows, the
    interleaved one of a 40-frame clip from its third window). None when no window does."""
    if captioned is None:
        return None
    frames, tokens = captioned
    use = (positions == frames[clips]).all(dim=1)
    return (use, tokens[clips]) if bool(use.any()) else None


def build_on_meta(global_encoder: GlobalEncoderConfig, grounding_encoder: GroundingEncoderConfig,
                  language_model: LanguageModelConfig, decoder: DecoderConfig, tokenizer=None) -> Grove:
    """Instantiate GROVE on the meta device: shapes and parameter counts, no memory, no weights.

    Checkpoint paths are ignored (nothing is loaded); without ``tokenizer`` and ``path``, the tiny
    tokenizer stands in (the LLM's vocabulary then comes from ``llama_config``).
    """
    from dataclasses import replace

    configs = (replace(global_encoder, checkpoint=None), replace(grounding_encoder, checkpoint=None),
               replace(language_model, path=None), replace(decoder, checkpoint=None))
    with torch.device("meta"):
        return Grove(*configs, tokenizer=tokenizer)


__all__ = ["Grove", "GroveOutput", "GrovePrediction", "gather_det_hidden", "build_on_meta", "PARAMETER_GROUPS",
           "PAPER_TRAINABLE"]
