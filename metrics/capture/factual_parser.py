"""The FACTUAL scene-graph parser (``flan-t5-base-VG-factual-sg``), CAPTURE's reference parser.

A T5 model that reads ``"Generate Scene Graph: <sentence>"`` and writes facts as
``( subject , predicate , object ) , ( subject , is , attribute ) , ( entity )``. It loads from a
local folder only (no hub here), runs on the CPU by default (the public CAPTURE code requires
CUDA), and reports tokeniser or generation errors as exceptions naming the sentence (the public
code drops into a debugger).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

from metrics.capture.scene_graph import SceneGraph

FACTUAL_PROMPT = "Generate Scene Graph: "
_FACT = re.compile(r"\(([^()]*)\)")


def parse_factual_output(text: str) -> SceneGraph:
    """Scene graph of one FACTUAL output string; malformed pieces are skipped, never fatal.

    * ``( s , p , o )`` is a relation, except ``( s , is , a )``: an attribute, or a quantity when
      ``a`` is a number (quantities are not CAPTURE elements: ``s`` is kept as an object only);
    * ``( e )`` is a lone entity; every subject and object of a fact is an object too;
    * a piece with 2 or more than 3 fields, or an empty field, is skipped;
    * generation cut by the length limit leaves an unclosed last piece: it is dropped, except when
      it is the only piece, in which case its first field is kept as an entity (as FACTUAL does).
    """
    text = str(text).replace(FACTUAL_PROMPT.strip(), " ")
    pieces = _FACT.findall(text)
    if not pieces:
        tail = text.rsplit("(", 1)
        if len(tail) == 2 and tail[1].split(",")[0].strip():
            pieces = [tail[1].split(",")[0]]
    objects: list[str] = []
    attributes: list[tuple[str, str]] = []
    relations: list[tuple[str, str, str]] = []
    for piece in pieces:
        fields = [" ".join(f.split()) for f in piece.split(",")]
        if any(not f for f in fields):
            continue
        if len(fields) == 1:
            objects.append(fields[0])
        elif len(fields) == 3:
            subject, predicate, obj = fields
            objects.append(subject)
            if predicate == "is":
                if not obj.replace(".", "", 1).isdigit():
                    attributes.append((subject, obj))
            else:
                objects.append(obj)
                relations.append((subject, predicate, obj))
    return SceneGraph(objects, attributes, relations)


class FactualSceneGraphParser:
    """FACTUAL T5 from a local folder (``save_pretrained`` layout), batched beam search.

    Defaults follow the public CAPTURE call: beam 5, inputs cut at 64 tokens, outputs at 128.
    """

    def __init__(self, path: str | os.PathLike, device: str = "cpu", beam_size: int = 5,
                 max_input_len: int = 64, max_output_len: int = 128, batch_size: int = 16) -> None:
        path = Path(path)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"FACTUAL parser folder {path} does not exist or has no config.json; expected a local copy "
                "of 'lizhuang144/flan-t5-base-VG-factual-sg' saved with save_pretrained (config.json, "
                "model weights, tokenizer files). Models cannot be downloaded here; use parser='spacy' "
                "for the offline parser.")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            self.model = AutoModelForSeq2SeqLM.from_pretrained(str(path), local_files_only=True)
        except Exception as err:
            raise RuntimeError(f"could not load the FACTUAL parser from {path}: {err}") from err
        self.device = torch.device(device)
        self.model.to(self.device).eval()
        self.path = path
        self.beam_size = int(beam_size)
        self.max_input_len = int(max_input_len)
        self.max_output_len = int(max_output_len)
        self.batch_size = int(batch_size)

    def generate(self, sentences: Sequence[str]) -> list[str]:
        """Raw FACTUAL output text per sentence."""
        import torch

        sentences = [str(s) for s in sentences]
        # Similar lengths in a batch waste less on padding; results go back in input order.
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
        texts: dict[int, str] = {}
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            prompts = [FACTUAL_PROMPT + sentences[i].strip() for i in idx]
            try:
                batch = self.tokenizer(prompts, max_length=self.max_input_len, truncation=True,
                                       padding=True, return_tensors="pt")
            except Exception as err:
                raise ValueError(f"FACTUAL tokeniser ({self.path}) failed on one of {prompts!r}: {err}") from err
            with torch.inference_mode():
                generated = self.model.generate(
                    batch["input_ids"].to(self.device), attention_mask=batch["attention_mask"].to(self.device),
                    decoder_start_token_id=self.tokenizer.pad_token_id, num_beams=self.beam_size,
                    max_length=self.max_output_len, early_stopping=self.beam_size > 1, num_return_sequences=1)
            decoded = self.tokenizer.batch_decode(generated, skip_special_tokens=True,
                                                  clean_up_tokenization_spaces=True)
            texts.update(zip(idx, decoded))
        return [texts[i] for i in range(len(sentences))]

    def parse(self, sentences: Sequence[str]) -> list[SceneGraph]:
        """One raw (not lemmatised) graph per sentence."""
        return [parse_factual_output(text) for text in self.generate(sentences)]
