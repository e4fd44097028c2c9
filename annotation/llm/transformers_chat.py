"""A local ``transformers`` causal LM as the Stage 2/3 LLM (Llama-2 in the paper; any chat model folder).

Prompts go through the tokenizer's chat template; models whose template refuses a system turn
get the system text prepended to the first user turn. Conversations are generated in batches
with left padding. The first attempt decodes greedily (reproducible); retries sample with
``retry_temperature`` from a seed fixed per attempt, so a re-run gives the same answers.
"""
from __future__ import annotations

import core  # noqa: F401  (transformers imports torchvision: the shim must run first)

import os
from pathlib import Path
from typing import Sequence

import torch


def _merge_system(conversation: list[dict]) -> list[dict]:
    if not conversation or conversation[0]["role"] != "system":
        return conversation
    system, rest = conversation[0]["content"], [dict(m) for m in conversation[1:]]
    if rest and rest[0]["role"] == "user":
        rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
        return rest
    return [{"role": "user", "content": system}, *rest]


class TransformersChat:
    """Chat with a local causal LM folder (``save_pretrained`` layout with a chat template)."""

    def __init__(self, path: str, max_new_tokens: int = 96, batch_size: int = 8, device: str = "auto",
                 dtype: str = "auto", retry_temperature: float = 0.7, seed: int = 0):
        folder = Path(path)
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(f"llm.path {folder}: no config.json (expected a local model folder "
                                    "written by save_pretrained)")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(f"llm.path {folder}: the tokenizer has no chat template (use an instruction-tuned model)")
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        torch_dtype = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16,
                       "float16": torch.float16}[dtype]
        self.device = torch.device(device)
        self.model = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True,
                                                          dtype=torch_dtype).to(self.device).eval()
        self.max_new_tokens, self.batch_size = int(max_new_tokens), int(batch_size)
        self.retry_temperature, self.seed = float(retry_temperature), int(seed)

    def render(self, conversation: list[dict]) -> str:
        try:
            return self.tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
        except Exception:  # noqa: BLE001 - templates raise their own errors for a system turn
            return self.tokenizer.apply_chat_template(_merge_system(conversation), tokenize=False,
                                                      add_generation_prompt=True)

    @torch.inference_mode()
    def complete(self, conversations: Sequence[list[dict]], attempt: int = 0) -> list[str]:
        out: list[str] = []
        sample = attempt > 0
        if sample:
            torch.manual_seed(self.seed + attempt)
        for start in range(0, len(conversations), self.batch_size):
            texts = [self.render(c) for c in conversations[start:start + self.batch_size]]
            enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
            options = {"do_sample": sample, "max_new_tokens": self.max_new_tokens,
                       "pad_token_id": self.tokenizer.pad_token_id}
            if sample:
                options["temperature"] = self.retry_temperature
            generated = self.model.generate(**enc, **options)
            new = generated[:, enc["input_ids"].shape[1]:]
            out.extend(self.tokenizer.batch_decode(new, skip_special_tokens=True))
        return out
