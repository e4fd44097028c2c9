"""An offline tokenizer for the toy judge: byte-level BPE holding Qwen2.5-VL's special tokens.

A real judge loads its tokenizer from the Qwen2.5-VL folder; the toy judge of the demo and the
tests trains this one, deterministically, on a fixed corpus of the judge's own words.
"""
from __future__ import annotations

from pathlib import Path

from judge.model.prompt_format import JUDGE_INSTRUCTION, SPECIAL_TOKENS, SYSTEM_PROMPT
from models.tiny_tokenizer import saved_tokenizer, train_byte_level_bpe

_TOKENIZER_CORPUS_WORDS = """
a an the then and of to in on at from behind with while is are video caption content helpful relevant
accurate accurately informative capture does not example objects actions incorrect score scale higher
indicates better overall performance explanation evaluation comprehensive bias format rate given
describing please first output single line containing only one integer subsequent provide avoiding any
potential strictly follow level detail relevance helpfulness accuracy you assistant system user
red green blue yellow purple orange white black brown pink gray grey circle square triangle diamond cross
rectangle star wall left right top bottom up down still man woman boy girl child person dog cat ball car
enters leaves moves stays bounces hides emerges passes spins shakes grows slides rolls jumps runs walks
enter leave move stay bounce hide emerge pass spin shake grow slide roll jump run walk sits stands plays
entering leaving moving staying bouncing hiding emerging passing playing holding throwing catching
"""


def tokenizer_corpus() -> list[str]:
    """A fixed corpus for the tiny tokenizer: the judge prompt, explanations and scene words."""
    words = _TOKENIZER_CORPUS_WORDS.split()
    lines = [" ".join(words[i:i + 10]) for i in range(0, len(words), 10)]
    lines += [JUDGE_INSTRUCTION.format(caption="a red circle moves left, then a blue square stays still.")] * 4
    lines += ["Describe the video in one sentence."] * 4
    lines += ["The caption is helpful, relevant, accurate, and informative to the video content."] * 4
    lines += ["The caption does not accurately capture the video content. For example, the objects "
              "(blue circle) and actions (hides) are incorrect."] * 4
    lines += [f"{d}\n\n" for d in "12345"] * 4
    lines += [f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n"] * 4
    return lines


def build_tiny_judge_tokenizer(out_dir: str | Path | None = None, vocab_size: int = 1024):
    """Byte-level BPE with Qwen's special tokens, trained on :func:`tokenizer_corpus` (deterministic;
    :func:`models.tiny_tokenizer.train_byte_level_bpe`).

    Saved to ``out_dir`` when given, atomically (and read back from there if already built).
    """
    from transformers import PreTrainedTokenizerFast

    def build():
        trained = train_byte_level_bpe(tokenizer_corpus(), vocab_size, SPECIAL_TOKENS)
        return PreTrainedTokenizerFast(tokenizer_object=trained, eos_token="<|im_end|>", pad_token="<|endoftext|>")

    return build() if out_dir is None else saved_tokenizer(out_dir, build)
