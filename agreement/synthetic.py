"""The project's synthetic stand-ins for FG-Eval and FOIL benchmarks: clips of the built-in
synthetic dataset (:mod:`datamodules.synthetic`) whose captions are corrupted by the judge's
generator (:mod:`judge.data.corruption.generator`, rule backend in its closed-domain mode), unbalanced so
that every one-substitution corruption is kept for the FOIL pairs. Needs no weights or downloads."""
from __future__ import annotations

from pathlib import Path

from datamodules.synthetic import generate_synthetic_dataset
from formats.records import read_records
from judge.data.corruption.data_types import sources_from_records
from judge.data.corruption.generator import generate_corruptions, write_jsonl
from judge.data.corruption.rule_backend import RuleBackend


def prepare_synthetic_benchmarks(root: str | Path, num_clips: int = 30, per_caption: int = 6, seed: int = 0,
                                 workers: int = 1) -> dict[str, Path]:
    """``{"videos": folder, "corruptions": JSONL}`` under ``root`` (reused when already there)."""
    root = Path(root)
    paths = generate_synthetic_dataset(root / "synthetic", num_train=1, num_val=1, num_test=int(num_clips), seed=seed,
                                       workers=workers, on_config_change="regenerate")
    out = root / f"corruptions_n{num_clips}_k{per_caption}_s{seed}.jsonl"
    if not out.is_file():
        sources = sources_from_records(read_records(paths["test"]))
        rows, _ = generate_corruptions(sources, RuleBackend(in_domain="require", closed_domain=True),
                                       per_caption=per_caption, seed=seed)
        write_jsonl(rows, out)
    return {"videos": root / "synthetic" / "videos", "corruptions": out}
