"""GROVE's prompt and target text: the chat-formatted request, the tagged answer, and parsing it back.

The LLM is asked ``The <video> provides an overview of the video.\\n<question>`` in Vicuna's chat
format and answers with the caption in which each grounded phrase is written
``<p> phrase </p> [DET]``. ``<video>`` becomes ``num_video_tokens`` placeholder tokens that the
language model replaces by the projected video tokens. The k-th [DET] of a sequence belongs to
the k-th tagged phrase (order of appearance).

Prompt and answer are tokenised separately and concatenated, so the prompt tokens are identical
in training and generation and the loss mask is exact. A :class:`GroundedCaptionPrompter` holds
only a tokenizer and plain values, so it pickles into DataLoader workers.
"""
from __future__ import annotations

import random
import re

import torch
from torch import Tensor

from formats.records import PHRASE_TAG, TAG

DET_TOKEN = "[DET]"
PHRASE_START = "<p>"
PHRASE_END = "</p>"
VIDEO_TOKEN = "<vid>"
GROVE_SPECIAL_TOKENS = (DET_TOKEN, PHRASE_START, PHRASE_END, VIDEO_TOKEN)
IGNORE_INDEX = -100
# The released GROVE's vocabulary: GLaMM's seven added tokens, then GROVE's three, appended in
# this order to LLaMA's 32,000 (ids 32000..32009). The video is one out-of-vocabulary id in the
# prompt (LLaVA's IMAGE_TOKEN_INDEX) that stands for all the video tokens.
OFFICIAL_ADDED_TOKENS = ("<im_start>", "<im_end>", "<bbox>", "<point>", "[SEG]", PHRASE_START, PHRASE_END,
                         "<vid_start>", "<vid_end>", DET_TOKEN)
OFFICIAL_VIDEO_INDEX = -200
# GLaMM's own vocabulary is the first seven of them (ids 32000..32006).
GLAMM_ADDED_TOKENS = OFFICIAL_ADDED_TOKENS[:7]
TOKEN_STYLES = ("compact", "official", "glamm")

VIDEO_PLACEHOLDER = "<video>"
VIDEO_PREAMBLE = f"The {VIDEO_PLACEHOLDER} provides an overview of the video.\n"
OFFICIAL_VIDEO_PREAMBLE = f"The <vid_start>{VIDEO_PLACEHOLDER}<vid_end> provides an overview of the video.\n"
# The six grounding questions of the released code, in its order; inference asks the first.
OFFICIAL_QUESTIONS = (
    "Could you please give me a description of the video? Please respond with interleaved bounding boxes for "
    "the corresponding parts of the answer.",
    "Can you provide a description of the this video? Please output with interleaved bounding boxes for the "
    "corresponding phrases.",
    "Please describe the contents of the video. Please respond with interleaved bounding boxes for the "
    "corresponding parts of the answer.",
    "Could you give an explanation of what can be found within this video? Please output with interleaved "
    "bounding boxes for the corresponding phrases.",
    "Could you give me an explanation of this video? Please respond with interleaved bounding boxes for the "
    "corresponding phrases.",
    "Could you provide me with an analysis of this video? Please output with interleaved bounding boxes for the "
    "corresponding parts of the answer.",
)
# The question of the released pointing-benchmark inference (YouCook-Interactions, GroundingYouTube).
OFFICIAL_POINTING_QUESTION = ("Could you please give me a description of the video? Please include a single "
                              "bounding box per frame capturing the activity described in the caption.")
# The paper's question first: evaluation always asks it; training samples among all six.
DEFAULT_QUESTIONS = (
    "Could you please give me a description of the video? Please respond with interleaved bounding "
    "boxes for the corresponding parts of the answer.",
    "What happens in this video? Answer with a caption and interleave bounding boxes for the phrases "
    "that name objects.",
    "Please describe what is going on in the video, and give interleaved bounding boxes for the "
    "corresponding phrases.",
    "Can you tell me what this video shows? Please respond with interleaved bounding boxes for the "
    "corresponding parts of the answer.",
    "Describe the video for me, please. Interleave bounding boxes with the parts of the answer they "
    "refer to.",
    "Could you summarise the content of this video? Please output interleaved bounding boxes for "
    "the corresponding phrases.",
)
CHAT_TEMPLATES = {
    # Vicuna v1 (LLaVA's conv_vicuna_v1): system, then "USER: ... ASSISTANT:"; answers end with EOS.
    "vicuna_v1": ("A chat between a curious user and an artificial intelligence assistant. The assistant "
                  "gives helpful, detailed, and polite answers to the user's questions. USER: {user} ASSISTANT:"),
    # LLaVA's conv_llava_v1, which the released GROVE's inference and training use ("human").
    "llava_v1": ("A chat between a curious human and an artificial intelligence assistant. The assistant "
                 "gives helpful, detailed, and polite answers to the human's questions. USER: {user} ASSISTANT:"),
    # No system text; for small models trained from scratch.
    "plain": "USER: {user} ASSISTANT:",
}



def add_grove_tokens(tokenizer, style: str = "compact") -> list[str]:
    """Add GROVE's special tokens (and a pad token) to ``tokenizer`` where missing; returns those added.

    ``compact``: ``[DET]``, ``<p>``, ``</p>`` and the ``<vid>`` placeholder. ``official``: the
    released vocabulary's ten tokens in their order (:data:`OFFICIAL_ADDED_TOKENS`), which must
    then be the tokenizer's last ten ids (a GLaMM tokenizer already holds the first seven).
    ``glamm``: GLaMM's seven (:data:`GLAMM_ADDED_TOKENS`), the last seven ids.
    The caller must resize the LLM's embeddings to ``len(tokenizer)`` afterwards.
    """
    if style not in TOKEN_STYLES:
        raise ValueError(f"model.language_model.special_tokens must be one of {TOKEN_STYLES}, got {style!r}")
    wanted = {"official": OFFICIAL_ADDED_TOKENS, "glamm": GLAMM_ADDED_TOKENS}.get(style, GROVE_SPECIAL_TOKENS)
    vocab = tokenizer.get_vocab()
    missing = [tok for tok in wanted if tok not in vocab]
    for tok in missing:  # one by one: the ids follow the order of ``wanted``
        tokenizer.add_tokens([tok], special_tokens=True)
    if style in ("official", "glamm"):
        ids = tokenizer.convert_tokens_to_ids(list(wanted))
        expected = list(range(len(tokenizer) - len(wanted), len(tokenizer)))
        if ids != expected:
            raise ValueError(
                f"model.language_model.special_tokens={style}: the tokenizer's GLaMM/GROVE tokens have ids "
                f"{dict(zip(wanted, ids))}, but the released vocabulary puts them, in this order, "
                f"at the last {len(wanted)} ids {expected[0]}..{expected[-1]}; use a LLaMA or GLaMM tokenizer folder")
    if tokenizer.pad_token is None:  # LLaMA/Vicuna ship none; LLaVA pads with <unk>
        tokenizer.pad_token = tokenizer.unk_token if tokenizer.unk_token is not None else tokenizer.eos_token
    return missing


def _collapse(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r"\s+([.,;:!?])", r"\1", text)


_DET_AFTER_PHRASE = re.compile(r"</p>\s*\[DET\]")
_STRAY_DET = re.compile(r"\s*\[DET\]\s*")


def format_target(tagged_caption: str) -> str:
    """``... <p>a red circle</p> ...`` -> ``... <p> a red circle </p> [DET] ...``.

    As the released datasets build targets (the tags inserted into the caption), the caption's own
    whitespace is kept as written, runs of spaces included (``two  people``); only the spaces at a
    phrase's tag boundaries are dropped, and the text is stripped at both ends. A ``[DET]`` after
    ``</p>`` is the format's own (so formatting twice changes nothing); any other becomes one space.
    """
    text = _STRAY_DET.sub(" ", _DET_AFTER_PHRASE.sub(PHRASE_END, tagged_caption))
    # A function replacement: phrase text is inserted verbatim, whatever characters it holds.
    text = PHRASE_TAG.sub(lambda m: f"{PHRASE_START} {m.group(1)} {PHRASE_END} {DET_TOKEN}", text)
    return text.strip()


TARGET_TEXTS = ("as_is", "official")


def official_target_text(tagged_caption: str) -> str:
    """The released datasets' caption normalisation before targets are built: surrounding double
    quotes and whitespace stripped, then lower case (phrases included)."""
    return tagged_caption.strip('"').strip().lower()


def official_answer_text(text: str) -> tuple[str, str, list[str]]:
    """The released inference's post-processing of the decoded answer -> ``(tagged, caption, phrases)``.

    Phrases are the ``<p>...</p>`` contents, stripped. The caption (what the released evaluation
    scores) drops every ``<...>`` tag and ``[DET]``, collapses whitespace and strips single quotes
    at both ends; a space the decoder wrote before punctuation stays (``floor ;``). The tagged
    caption is the same with the ``<p>``/``</p>`` tags kept (other ``<...>`` tags, e.g. EOS, dropped).
    """
    phrases = [p.strip() for p in re.findall(r"<p>(.*?)</p>", text)]
    caption = " ".join(re.sub(r"<.*?>", "", text).replace(DET_TOKEN, "").split()).strip("'").strip()
    tagged = re.sub(r"<(?!/?p>).*?>", "", text).replace(DET_TOKEN, "")
    return " ".join(tagged.split()).strip("'").strip(), caption, phrases


def package_tagged_text(text: str) -> str:
    """The official inference package's ``text_tagged`` of a decoded answer: ``[DET]`` removed,
    whitespace collapsed, single quotes stripped at both ends; ``<p>``/``</p>`` and every other tag
    (the EOS ``</s>`` included) kept. :func:`official_answer_text` gives its ``text`` and ``phrases``."""
    return " ".join(text.replace(DET_TOKEN, "").split()).strip("'").strip()


# How generated ids are decoded to the text that later windows re-tokenise (Grove.predict):
# ``official`` as the training repository's inference scripts (its slow tokenizer),
# ``package`` as the official inference package (its fast tokenizer).
RELEASED_TEXT_PROTOCOLS = ("official", "package")


def parse_tagged_text(text: str, drop: tuple[str, ...] = ()) -> tuple[str, str, list[str]]:
    """Generated text -> ``(tagged_caption "<p>x</p>" style, plain caption, phrases)``.

    Tolerates missing [DET] tokens, extra spaces, stray ``</p>``, a ``<p>`` opened inside a
    phrase (closes the previous one) and a phrase left open at the end (closed there); empty
    phrases lose their tags. Strings in ``drop`` (e.g. EOS/pad) are removed first.
    """
    # The format's own "</p> [DET]" separator goes with the tag, so that text written right after
    # it ("[DET])") stays attached to the phrase and re-formats to the same tokens.
    text = _DET_AFTER_PHRASE.sub(PHRASE_END, text)
    for token in (*drop, DET_TOKEN, VIDEO_TOKEN):
        if token:
            text = text.replace(token, " ")
    tagged_parts: list[str] = []
    plain_parts: list[str] = []
    phrases: list[str] = []
    inside = False
    closed = False  # the last part is a phrase: text without a leading space attaches to it
    current: list[str] = []

    def close() -> bool:
        phrase = _collapse("".join(current))
        current.clear()
        if phrase:
            phrases.append(phrase)
            tagged_parts.append(f"{PHRASE_START}{phrase}{PHRASE_END}")
            plain_parts.append(phrase)
        return bool(phrase)

    for piece in TAG.split(text):
        if piece == PHRASE_START:
            if inside:
                closed = close()
            inside = True
        elif piece == PHRASE_END:
            if inside:
                closed = close()
            inside = False
        elif inside:
            current.append(piece)
        elif piece:
            if closed and not piece[0].isspace():
                tagged_parts[-1] += piece
                plain_parts[-1] += piece
            else:
                tagged_parts.append(piece)
                plain_parts.append(piece)
            closed = False
    if inside:
        close()
    return _collapse(" ".join(tagged_parts)), _collapse(" ".join(plain_parts)), phrases


def _pad(sequences: list[list[int]], pad_id: int, left: bool) -> dict[str, Tensor]:
    length = max((len(s) for s in sequences), default=0)
    ids = torch.full((len(sequences), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), length), dtype=torch.long)
    for i, seq in enumerate(sequences):  # a few rows per batch
        if seq:
            span = slice(length - len(seq), length) if left else slice(0, len(seq))
            ids[i, span] = torch.tensor(seq)
            mask[i, span] = 1
    return {"input_ids": ids, "attention_mask": mask}


class GroundedCaptionPrompter:
    """Tokenises GROVE's prompts and targets; parses generated answers.

    Args:
        tokenizer: a Hugging Face tokenizer that already holds GROVE's special tokens
            (:func:`add_grove_tokens`) and has bos/eos/pad tokens.
        num_video_tokens: how many placeholder tokens stand for the video.
        template: chat template name (``vicuna_v1``, ``llava_v1`` or ``plain``).
        questions: question paraphrases; the first is the evaluation question.
        sample_question: draw a random paraphrase in :meth:`encode_training` when given an rng.
        style: ``compact`` (GROVE's own tokens; ``<video>`` becomes ``<vid>`` placeholders) or
            ``official`` (the released prompt ``The <vid_start><video><vid_end> ...``, its six
            questions by default, and the out-of-vocabulary placeholder id -200 repeated once per
            video token, which the language model replaces by the video tokens).
        target_text: ``as_is`` (captions as the records hold them) or ``official`` (as the released
            datasets: surrounding quotes stripped and lower-cased, :func:`official_target_text`).
    """

    def __init__(self, tokenizer, num_video_tokens: int, template: str = "vicuna_v1",
                 questions: list[str] | None = None, sample_question: bool = True, style: str = "compact",
                 target_text: str = "as_is"):
        if target_text not in TARGET_TEXTS:
            raise ValueError(f"target_text must be one of {TARGET_TEXTS}, got {target_text!r}")
        self.target_text = target_text
        if template not in CHAT_TEMPLATES:
            raise ValueError(f"chat template must be one of {sorted(CHAT_TEMPLATES)}, got {template!r}")
        if style not in TOKEN_STYLES:
            raise ValueError(f"prompt style must be one of {TOKEN_STYLES}, got {style!r}")
        vocab = tokenizer.get_vocab()
        required = OFFICIAL_ADDED_TOKENS if style == "official" else GROVE_SPECIAL_TOKENS
        missing = [tok for tok in required if tok not in vocab]
        if missing:
            raise ValueError(f"tokenizer lacks GROVE's special tokens {missing}; call add_grove_tokens first")
        for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
            if getattr(tokenizer, name) is None:
                raise ValueError(f"tokenizer has no {name[:-3]}")
        if num_video_tokens < 1:
            raise ValueError(f"num_video_tokens must be >= 1, got {num_video_tokens}")
        self.tokenizer = tokenizer
        self.num_video_tokens = int(num_video_tokens)
        self.template = template
        self.style = style
        official = style == "official"
        self.questions = tuple(questions) if questions else (OFFICIAL_QUESTIONS if official else DEFAULT_QUESTIONS)
        self.sample_question = sample_question
        self.preamble = OFFICIAL_VIDEO_PREAMBLE if official else VIDEO_PREAMBLE
        self.det_token_id = tokenizer.convert_tokens_to_ids(DET_TOKEN)
        self.video_token_id = OFFICIAL_VIDEO_INDEX if official else tokenizer.convert_tokens_to_ids(VIDEO_TOKEN)
        self._prompt_cache: dict[str, list[int]] = {}

    # -- prompts -----------------------------------------------------------------------------------
    def prompt_ids(self, question: str) -> list[int]:
        """BOS + chat-formatted request with ``<video>`` expanded to the placeholder tokens."""
        ids = self._prompt_cache.get(question)
        if ids is None:
            text = CHAT_TEMPLATES[self.template].format(user=self.preamble + question)
            before, after = text.split(VIDEO_PLACEHOLDER, 1)
            encode = lambda s: self.tokenizer(s, add_special_tokens=False)["input_ids"]  # noqa: E731
            ids = [self.tokenizer.bos_token_id, *encode(before), *[self.video_token_id] * self.num_video_tokens,
                   *encode(after)]
            self._prompt_cache[question] = ids
        return list(ids)

    def _question(self, rng: random.Random | None) -> str:
        if self.sample_question and rng is not None:
            return rng.choice(self.questions)
        return self.questions[0]

    def answer_ids(self, tagged_captions: list[str], formatted: bool = False) -> list[list[int]]:
        """Target token ids (``<p> phrase </p> [DET]`` format) followed by EOS.

        ``formatted``: the texts are answers already (e.g. decoded text to re-encode as it is).
        """
        if formatted:
            texts = [" " + c for c in tagged_captions]
        else:
            normalise = official_target_text if self.target_text == "official" else str
            texts = [" " + format_target(normalise(c)) for c in tagged_captions]
        encoded = self.tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
        return [ids + [self.tokenizer.eos_token_id] for ids in encoded]

    def encode_training(self, tagged_captions: list[str], rng: random.Random | None = None,
                        formatted: bool = False, question: str | None = None) -> dict[str, Tensor]:
        """Right-padded ``input_ids``, ``attention_mask`` and ``labels`` (-100 outside the answer);
        ``question`` replaces the prompter's own (the pointing benchmarks ask another)."""
        question = self._question(rng) if question is None else question
        prompt = self.prompt_ids(question)
        answers = self.answer_ids(list(tagged_captions), formatted=formatted)
        length = max((len(prompt) + len(a) for a in answers), default=len(prompt))
        b = len(answers)
        input_ids = torch.full((b, length), self.tokenizer.pad_token_id, dtype=torch.long)
        labels = torch.full((b, length), IGNORE_INDEX, dtype=torch.long)
        attention_mask = torch.zeros((b, length), dtype=torch.long)
        for i, answer in enumerate(answers):  # builds small CPU tensors once per batch, in the collate
            n = len(prompt) + len(answer)
            input_ids[i, :n] = torch.tensor(prompt + answer)
            labels[i, len(prompt):n] = torch.tensor(answer)
            attention_mask[i, :n] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}

    def encode_prompts(self, batch_size: int, rng: random.Random | None = None) -> dict[str, Tensor]:
        """Prompts for generation, ``input_ids``/``attention_mask`` (one question per call, so the rows
        are identical and need no padding; :meth:`left_pad` pads rows of different lengths)."""
        prompt = self.prompt_ids(self._question(rng))
        ids = torch.tensor(prompt, dtype=torch.long).unsqueeze(0).expand(batch_size, -1).clone()
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    @staticmethod
    def left_pad(sequences: list[list[int]], pad_id: int) -> dict[str, Tensor]:
        """Left-pad token lists into ``input_ids``/``attention_mask`` for generation."""
        return _pad(sequences, pad_id, left=True)

    @staticmethod
    def right_pad(sequences: list[list[int]], pad_id: int) -> dict[str, Tensor]:
        """Right-pad token lists (a full forward pass, positions from 0 in every row)."""
        return _pad(sequences, pad_id, left=False)

    # -- answers -----------------------------------------------------------------------------------
    def det_positions(self, input_ids: Tensor) -> Tensor:
        """Boolean mask of [DET] tokens."""
        return input_ids == self.det_token_id

    def decode(self, token_ids: list[int]) -> str:
        """Generated ids -> text with GROVE's tags kept; stops at the first EOS, drops padding."""
        eos = self.tokenizer.eos_token_id
        if eos in token_ids:
            token_ids = token_ids[: token_ids.index(eos)]
        token_ids = [t for t in token_ids if t != self.tokenizer.pad_token_id and t >= 0]
        return self.tokenizer.decode(token_ids, skip_special_tokens=False)

    def decode_official(self, token_ids: list[int]) -> str:
        """The released code's decode (its slow LLaMA tokenizer): runs of ordinary tokens decoded
        apart (each run's first word-boundary space dropped, empty runs dropped), joined to the
        added tokens (``<p>``, ``[DET]``, ...) by single spaces; placeholders and padding dropped,
        EOS kept as text. So ``</p> [DET]`` then ``;`` reads ``</p> [DET] ;``."""
        tok = self.tokenizer
        added = set(tok.get_added_vocab().values()) - {tok.bos_token_id, tok.eos_token_id, tok.unk_token_id,
                                                          tok.pad_token_id}
        parts: list[str] = []
        run: list[int] = []

        def flush() -> None:
            if run:
                text = tok.decode(run, skip_special_tokens=False, clean_up_tokenization_spaces=False)
                if text:
                    parts.append(text)
                run.clear()

        for token in token_ids:
            if token < 0 or token == tok.pad_token_id:
                continue
            if token in added:
                flush()
                parts.append(tok.convert_ids_to_tokens(token))
            else:
                run.append(token)
        flush()
        return " ".join(parts)

    def decode_package(self, token_ids: list[int]) -> str:
        """The official inference package's decode (its fast tokenizer, special tokens kept): the
        pieces fused as written, so an added token is joined to the text after it (``</p> [DET];`` for
        the generated ``</p>``, ``▁``, ``[DET]``, ``;``); placeholders and padding dropped."""
        tok = self.tokenizer
        ids = [t for t in token_ids if t >= 0 and t != tok.pad_token_id]
        return tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def released_answer(self, protocol: str, prompt_ids: list[int], generated_ids: list[int]) -> str:
        """The answer text a released inference re-tokenises for the windows other than the caption
        window: the decoded prompt and answer, newlines removed, double spaces halved, after the
        last ``ASSISTANT: ``; decoded as the training repository's scripts do (``official``,
        :meth:`decode_official`) or as the inference package does (``package``, :meth:`decode_package`).
        The EOS, when generated, stays in the text."""
        if protocol not in RELEASED_TEXT_PROTOCOLS:
            raise ValueError(f"a released text protocol is one of {RELEASED_TEXT_PROTOCOLS}, got {protocol!r}")
        decode = self.decode_official if protocol == "official" else self.decode_package
        text = decode([*prompt_ids, *generated_ids]).replace("\n", "").replace("  ", " ")
        return text.split("ASSISTANT: ")[-1]

    def official_answer(self, prompt_ids: list[int], generated_ids: list[int]) -> str:
        """:meth:`released_answer` as the training repository's inference scripts decode it."""
        return self.released_answer("official", prompt_ids, generated_ids)

    def parse_generated(self, text: str) -> tuple[str, str, list[str]]:
        """Generated text -> ``(tagged_caption, caption, phrases)``; see :func:`parse_tagged_text`."""
        tok = self.tokenizer
        drop = tuple(t for t in (tok.eos_token, tok.bos_token, tok.pad_token, tok.unk_token) if t)
        return parse_tagged_text(text, drop=drop)
