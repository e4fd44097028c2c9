"""Share of random grounded captions whose training ids and labels equal the released GROVE's, per
LLaMA tokenizer folder layout, with this project's loader and with the folder's own settings.

The released rules are :mod:`models.grove.official_tokenization` (the test suite's reference); the real LLaMA
vocabulary comes from $GROVE_LLAMA_TOKENIZER_DIR or ../shared/llama_tokenizer:

    PYTHONPATH=. .venv/bin/python bench/bench_tokenizer_fidelity.py [--captions 1000]
"""
from __future__ import annotations

import core  # noqa: F401

import argparse
import json
import random
import shutil
import tempfile
from pathlib import Path

from transformers import AutoTokenizer

from models.grove.language_model import load_tokenizer_folder
from models.grove.official_tokenization import ENV_VAR, OfficialRules, llama_tokenizer_root, random_caption
from models.grove.prompting import OFFICIAL_QUESTIONS, GroundedCaptionPrompter, add_grove_tokens


def layouts(root: Path, scratch: Path) -> dict[str, Path]:
    legacy_false, model_only = scratch / "legacy_false", scratch / "model_only"
    legacy_false.mkdir()
    model_only.mkdir()
    shutil.copy(root / "llama_json" / "tokenizer.json", legacy_false)
    config = json.loads((root / "llama_json" / "tokenizer_config.json").read_text())
    (legacy_false / "tokenizer_config.json").write_text(json.dumps({**config, "legacy": False}))
    shutil.copy(root / "glamm" / "tokenizer.model", model_only)
    return {"GLaMM (tokenizer.model, legacy: false)": root / "glamm",
            "tokenizer.json, legacy: true": root / "llama_json",
            "tokenizer.json, legacy: false": legacy_false,
            "tokenizer.model alone": model_only}


def share_equal(tokenizer, rules: OfficialRules, captions: int) -> int:
    add_grove_tokens(tokenizer, "official")
    prompter = GroundedCaptionPrompter(tokenizer, 1, template="llava_v1", style="official", sample_question=False)
    rng, equal = random.Random(7), 0
    for k in range(captions):
        tagged, answer = random_caption(rng)
        question = OFFICIAL_QUESTIONS[k % len(OFFICIAL_QUESTIONS)]
        prompter.questions = (question,)
        enc = prompter.encode_training([tagged])
        ids, labels = rules.training(question, answer)
        equal += enc["input_ids"][0].tolist() == ids and enc["labels"][0].tolist() == labels
    return equal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--captions", type=int, default=1000)
    args = parser.parse_args()
    root, found = llama_tokenizer_root()
    if not found:
        print(f"skipped: no LLaMA vocabulary in {root} (set {ENV_VAR} to a folder with glamm/ and llama_json/)")
        return
    rules = OfficialRules(root / "glamm" / "tokenizer.model")
    with tempfile.TemporaryDirectory() as scratch:
        print(f"{'folder':40s} {'this loader':>12s} {'own settings':>13s}")
        for name, folder in layouts(root, Path(scratch)).items():
            ours = share_equal(load_tokenizer_folder(folder), rules, args.captions)
            try:
                own = f"{share_equal(AutoTokenizer.from_pretrained(str(folder)), rules, args.captions)}"
            except (OSError, ValueError, ImportError) as err:
                own = f"fails ({type(err).__name__})"
            print(f"{name:40s} {ours:>7d}/{args.captions} {own:>8s}/{args.captions}")


if __name__ == "__main__":
    main()
