"""The caption-corruption backend that asks a local causal LM (VC-Inspector paper, prompts D.1-D.5).

Greedy decoding; an answer that does not have the asked-for form raises
:class:`~judge.data.corruption.data_types.MalformedLLMOutput`, which the pipeline counts and
skips: it is never patched into something that looks valid.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from judge.data.corruption.data_types import Extraction, FactualElement, MalformedLLMOutput, Substitution
from judge.data.corruption.lexicon import share_synset
from judge.data.targets import unique_items

PROMPT_EXTRACT_OBJECTS = (
    "### Instruction:\nGiven the input text, generate a list of objects in the caption in the format of "
    "[\"Object1\", \"Object2\", ...]. Don't include any verbs. ONLY REPLY THE ANSWER.\n\n"
    "### Input: {caption}\n### Output:")
PROMPT_EXTRACT_ACTIONS = (
    "### Instruction:\nGiven the input text, generate a list of actions in the caption in the format of "
    "[\"Action1\", \"Action2\", ...]. ONLY REPLY THE ANSWER.\n\n### Input: {caption}\n### Output:")
PROMPT_SIMILAR_OBJECT = (
    "### Instruction:\nFind the parent class of the given object and generate one of its child classes that has "
    "a different meaning but shares the same parent. The new class cannot be a synonym or similar term to the "
    "original object. It can be an antonym or any co-hyponym. For example, generate \"dog\" for \"cat\". ONLY "
    "REPLY THE NEW CLASS.\n\n### Input: {object}\n### Output:")
PROMPT_SIMILAR_ACTION = (
    "### Instruction:\nFind a different action that the subject can perform that has a different meaning than "
    "the input action. The new action cannot be a synonym or similar term to the original action. For example, "
    "generate \"put into\" for \"take out of\". ONLY REPLY THE NEW ACTION.\n\n### Input: {action}\n### Output:")
PROMPT_SUBSTITUTE = (
    "### Instruction:\nSubstitute {old} in {caption} as {new}. Keep the answer in the same format as {caption}. "
    "ONLY REPLY THE ANSWER.\n\n### Input: {caption}\n### Output:")


def parse_llm_list(text: str, prompt: str) -> list[str]:
    """The ``["a", "b"]`` answer of prompts D.1/D.2 as a list of non-empty strings."""
    match = re.search(r"\[.*?\]", text, re.DOTALL)
    if match is None:
        raise MalformedLLMOutput(prompt, "no [...] list in the answer", text)
    try:
        value = ast.literal_eval(match.group(0))
    except (ValueError, SyntaxError):
        raise MalformedLLMOutput(prompt, "the [...] list is not a valid list literal", text) from None
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise MalformedLLMOutput(prompt, "the list must hold non-empty strings", text)
    return unique_items(v.strip() for v in value)


def parse_llm_phrase(text: str, prompt: str, original: str, max_words: int = 4) -> str:
    """The one-phrase answer of prompts D.3/D.4; must differ from the original and not be a synonym."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = line.strip("\"'`.").strip()
    if not line:
        raise MalformedLLMOutput(prompt, "empty answer", text)
    if len(line.split()) > max_words or not re.fullmatch(r"[A-Za-z][A-Za-z \-]*", line):
        raise MalformedLLMOutput(prompt, f"expected one short phrase (<= {max_words} words, letters only)", text)
    if line.lower() == original.lower():
        raise MalformedLLMOutput(prompt, "the answer repeats the original", text)
    pos = "n" if prompt == "D.3" else "v"
    if share_synset(line.lower(), original.lower(), pos):
        raise MalformedLLMOutput(prompt, "the answer is a WordNet synonym of the original", text)
    return line


def parse_llm_caption(text: str, previous: str, new: str) -> str:
    """The rewritten caption of prompt D.5: one non-empty line that changed and mentions the new word."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "").strip("\"'`").strip()
    if not line:
        raise MalformedLLMOutput("D.5", "empty answer", text)
    if line == previous.strip():
        raise MalformedLLMOutput("D.5", "the caption did not change", text)
    stem = new.lower().split()[0]
    stem = stem[:-1] if stem.endswith("e") and len(stem) > 3 else stem
    if stem not in line.lower():
        raise MalformedLLMOutput("D.5", f"the rewritten caption does not contain {new!r}", text)
    return line


class LLMBackend:
    """Prompts D.1-D.5 on a local causal LM (transformers), greedy decoding."""

    name = "llm"

    def __init__(self, model_path: str | Path | None = None, model: Any = None, tokenizer: Any = None,
                 max_new_tokens: int = 48, device: str = "cpu", dtype: str = "float32"):
        import torch

        if model is None or tokenizer is None:
            if model_path is None:
                raise ValueError("LLMBackend needs model_path, or both model and tokenizer")
            if not Path(model_path).is_dir():
                raise FileNotFoundError(f"LLM path {model_path} is not a folder (expected a local transformers model)")
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(model_path))
            model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=getattr(torch, dtype))
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.device = device
        self.max_new_tokens = max_new_tokens
        self.answers = 0

    def generate(self, prompt: str) -> str:
        import torch

        enc = self.tokenizer(prompt, return_tensors="pt").to(self.device)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        with torch.no_grad():
            out = self.model.generate(**enc, do_sample=False, max_new_tokens=self.max_new_tokens, pad_token_id=pad)
        self.answers += 1
        return self.tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)

    def prepare(self, captions: Sequence[str]) -> list[Extraction | MalformedLLMOutput]:
        out = []
        for caption in captions:
            try:
                objects = parse_llm_list(self.generate(PROMPT_EXTRACT_OBJECTS.format(caption=caption)), "D.1")
                actions = parse_llm_list(self.generate(PROMPT_EXTRACT_ACTIONS.format(caption=caption)), "D.2")
            except MalformedLLMOutput as err:
                out.append(err)
                continue
            out.append(Extraction(caption, [FactualElement("object", o, o.lower()) for o in objects],
                                  [FactualElement("action", a, a.lower()) for a in actions]))
        return out

    def usable(self, extraction: Extraction) -> tuple[list[FactualElement], list[FactualElement]]:
        return extraction.objects, extraction.actions

    def substitute(self, extraction: Extraction, chosen: Sequence[FactualElement],
                   rng: np.random.Generator) -> tuple[str, list[Substitution]]:
        caption = extraction.caption
        substitutions = []
        for element in chosen:
            if element.kind == "object":
                new = parse_llm_phrase(self.generate(PROMPT_SIMILAR_OBJECT.format(object=element.text)), "D.3",
                                       element.text)
            else:
                new = parse_llm_phrase(self.generate(PROMPT_SIMILAR_ACTION.format(action=element.text)), "D.4",
                                       element.text)
            answer = self.generate(PROMPT_SUBSTITUTE.format(old=element.text, caption=caption, new=new))
            caption = parse_llm_caption(answer, caption, new)
            substitutions.append(Substitution(element.kind, element.text, new))
        return caption, substitutions
