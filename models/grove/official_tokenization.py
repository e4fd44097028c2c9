"""The released GROVE's text-to-ids rules, written down independently of transformers.

The released code tokenises with the slow ``LlamaTokenizer`` of the GLaMM folder (``legacy: false``),
after adding ``<vid_start>``, ``<vid_end>`` and ``[DET]`` as special tokens. Its rules, applied here
with the SentencePiece model itself:

- the text gets one leading ``▁``; it is split at every added token (longest match first);
- a piece of text between added tokens is encoded by SentencePiece without a dummy prefix: a
  leading space becomes ``▁`` (so ``[DET].`` gives ``.`` and ``[DET] .`` gives ``▁.``);
- a text that starts with a special added token loses that leading ``▁`` (GLaMM's own tokens,
  e.g. ``<p>``, are not special and keep it);
- the conversation (LLaVA v1: system, ``USER: ... ASSISTANT: answer</s>``) is split at
  ``<video>``; each chunk is tokenised with BOS, later chunks drop it, one id -200 between;
- labels: everything before the answer's first token is ignored; the answer and its ``</s>`` are
  kept (the instruction length is that of ``... ASSISTANT: `` minus its BOS and trailing ``▁``);
- decoding: runs of ordinary pieces between added tokens are decoded by SentencePiece, the first
  piece of each run losing one leading ``▁``, empty runs dropped, and the runs and added tokens
  joined with single spaces. (The official inference package decodes with a fast tokenizer instead,
  which fuses the pieces as written: ``[DET];`` where these rules give ``[DET] ;``; see
  ``GroundedCaptionPrompter.decode_package``.)

An independent reference, not used to tokenise: the project's own loader (``models.grove.language_model``)
must reproduce these ids (``tests/models/test_official_tokenization.py``), and
``bench/bench_tokenizer_fidelity.py`` measures how often it does per tokenizer folder layout.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

SHARED_LLAMA = Path(__file__).resolve().parents[1].parent / "shared" / "llama_tokenizer"
ENV_VAR = "GROVE_LLAMA_TOKENIZER_DIR"
GLAMM_TOKENS = ("<im_start>", "<im_end>", "<bbox>", "<point>", "[SEG]", "<p>", "</p>")
GROVE_TOKENS = ("<vid_start>", "<vid_end>", "[DET]")  # added with special_tokens=True
SPECIAL = ("<unk>", "<s>", "</s>")
SYSTEM = ("A chat between a curious human and an artificial intelligence assistant. The assistant gives helpful, "
          "detailed, and polite answers to the human's questions.")
VIDEO_ID = -200
IGNORE = -100


def llama_tokenizer_root() -> tuple[Path, bool]:
    """The folder that should hold ``glamm/`` and ``llama_json/`` ($GROVE_LLAMA_TOKENIZER_DIR, else
    ../shared/llama_tokenizer) and whether it holds both tokenizer files."""
    root = Path(os.environ.get(ENV_VAR) or SHARED_LLAMA)
    return root, (root / "glamm" / "tokenizer.model").is_file() and (root / "llama_json" / "tokenizer.json").is_file()


class OfficialRules:
    """Ids and text as the released code's slow GLaMM tokenizer makes them (module docstring)."""

    def __init__(self, model_file: Path):
        import sentencepiece as spm
        from sentencepiece import sentencepiece_model_pb2

        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString(Path(model_file).read_bytes())
        proto.normalizer_spec.add_dummy_prefix = False
        self.sp = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
        base = self.sp.get_piece_size()
        self.added = {tok: base + i for i, tok in enumerate(GLAMM_TOKENS + GROVE_TOKENS)}
        self.split_tokens = {**{t: self.sp.piece_to_id(t) for t in SPECIAL}, **self.added}
        self.special = set(SPECIAL) | set(GROVE_TOKENS)
        self.id_to_added = {i: t for t, i in self.added.items()}
        alternatives = sorted(self.split_tokens, key=len, reverse=True)
        self._splitter = re.compile("(" + "|".join(re.escape(t) for t in alternatives) + ")")
        self.bos, self.eos, self.unk = (self.sp.piece_to_id(t) for t in ("<s>", "</s>", "<unk>"))

    # -- text -> ids ----------------------------------------------------------------------------
    def encode(self, text: str, bos: bool = True) -> list[int]:
        ids: list[int] = []
        if text:
            text = "\u2581" + text.replace("\u2581", " ")
            pieces: list[str | int] = []
            for chunk in self._splitter.split(text):
                if not chunk:
                    continue
                if chunk in self.split_tokens:
                    pieces.append(self.split_tokens[chunk])
                else:
                    pieces.extend(self.sp.encode(chunk.replace("\u2581", " ")))
            if len(pieces) > 1 and pieces[0] == self.sp.piece_to_id("\u2581") and \
                    self._token(pieces[1]) in self.special:
                pieces = pieces[1:]
            ids = [int(p) for p in pieces]
        return [self.bos, *ids] if bos else ids

    def _token(self, i: int) -> str:
        return self.id_to_added.get(i) or self.sp.id_to_piece(i)

    @staticmethod
    def conversation(question: str, answer: str = "") -> str:
        user = f"The <vid_start><video><vid_end> provides an overview of the video.\n{question}"
        return f"{SYSTEM} USER: {user} " + (f"ASSISTANT: {answer}</s>" if answer else "ASSISTANT:")

    def with_video(self, prompt: str) -> list[int]:
        chunks = [self.encode(c) for c in prompt.split("<video>")]
        ids = list(chunks[0])
        for chunk in chunks[1:]:
            ids += [VIDEO_ID, *chunk[1:]]
        return ids

    def generation_prompt(self, question: str) -> list[int]:
        return self.with_video(self.conversation(question))

    def training(self, question: str, answer: str) -> tuple[list[int], list[int]]:
        """``(input_ids, labels)`` of one training conversation."""
        text = self.conversation(question, answer)
        ids = self.with_video(text)
        round_text = text.split("</s>")[0]
        instruction = round_text.split(" ASSISTANT: ")[0] + " ASSISTANT: "
        start = 1 + len(self.with_video(instruction)) - 2
        end = 1 + len(self.with_video(round_text))
        labels = [IGNORE] * start + ids[start:end] + [IGNORE] * (len(ids) - end)
        return ids, labels

    # -- ids -> text ----------------------------------------------------------------------------
    def _run_text(self, pieces: list[str]) -> str:
        pieces = list(pieces)
        if pieces[0].startswith("\u2581"):
            pieces[0] = pieces[0][1:]
        out, current, after_special = "", [], False
        for i, piece in enumerate(pieces):
            if piece in SPECIAL:
                out += self.sp.decode_pieces(current) + piece
                current, after_special = [], True
            else:
                if after_special and i == 1 and not piece.startswith("\u2581"):
                    out += " "
                current.append(piece)
                after_special = False
        return out + self.sp.decode_pieces(current)

    def decode(self, ids: list[int]) -> str:
        parts, run = [], []
        for i in ids:
            if i in self.id_to_added:
                if run:
                    text = self._run_text(run)
                    if text:
                        parts.append(text)
                    run = []
                parts.append(self.id_to_added[i])
            else:
                run.append(self.sp.id_to_piece(i))
        if run:
            parts.append(self._run_text(run))
        return " ".join(parts)


# -- random grounded captions -------------------------------------------------------------------
WORDS = ("a", "the", "man", "woman", "cuts", "onion", "pan", "on", "with", "knife", "board", "red", "oil", "pours",
         "into", "bowl", "then", "and", "it", "hand", "his", "her", "small", "Chef", "TV", "don't", "3", "x-ray",
         "well-done", "café", "o'clock", "floor", "uses", "spoon", "(left)", "stirs", "sauce")
AFTER_PHRASE = (".", ",", ";", ":", "!", "?", "?,", "'s", "-", ")", "'", '"', "...", ".)", "?!", ",\"")


def random_caption(rng) -> tuple[str, str]:
    """``(tagged caption "<p>x</p>" as records hold it, official answer "<p> x </p> [DET]...")``.

    Phrases at the start and the end, punctuation (or nothing) right after a phrase, words after.
    """
    tagged, answer = [], []
    for k in range(rng.randint(1, 4)):
        if k > 0 or rng.random() < 0.5:
            before = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
            tagged.append(before + " ")
            answer.append(before + " ")
        phrase = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
        tagged.append(f"<p>{phrase}</p>")
        answer.append(f"<p> {phrase} </p> [DET]")
        tail = rng.choice(AFTER_PHRASE) if rng.random() < 0.7 else ""
        if rng.random() < 0.3:
            tail += " " + rng.choice(WORDS)
        elif tail and rng.random() < 0.5:
            tail += " "
        tagged.append(tail)
        answer.append(tail)
        if rng.random() < 0.5 and tail and not tail.endswith(" "):
            tagged.append(" ")
            answer.append(" ")
    return "".join(tagged).strip(), "".join(answer).strip()
