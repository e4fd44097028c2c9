"""``grove annotate compare``: the GROVE paper's Table 6 (sec. 6.4) as one command.

The proposed pipeline and each alternative (a row: overlays on the base pipeline config) annotate
the same clips; each output is scored against the truth with the project's evaluator (every truth
clip counts, a rejected clip as an empty prediction, so every row is filled), and the table is
written in the paper's layout (METEOR, CIDEr, AP50, Recall and their average, in percent) to
``OUT/table6.md`` and ``OUT/table6.json``. Row outputs stay under ``OUT/runs/<row>`` (re-runs resume).

The comparison config (YAML)::

    data:                      # either generated synthetic clips ...
      synthetic: {num_clips: 8, seed: 0, duration_s: 4.0}
    # data: {videos: DIR, truth: ANNOTATIONS}      # ... or your own clips and truth
    base: [configs/annotation/synthetic.yaml]     # the proposed pipeline
    rows:                                          # name -> overlay configs (files) and inline overrides
      Proposed: {}
      Alt. Stage 2: {configs: [configs/annotation/alt_stage2_captions.yaml]}
      Alt. Stage 3 (CoTracker3): {override: {stage3: {backend: cotracker, path: null}}}
    score: {text_encoder: minilm}
"""
from __future__ import annotations

from core.output_files import write_json_atomic

import copy
import re
from pathlib import Path

import yaml

from annotation.config import ConfigError, load_config

METRICS = (("METEOR", "METEOR"), ("CIDEr", "CIDEr"), ("AP50", "AP50"), ("Recall", "recall"))
_KEYS = {"data", "base", "rows", "score"}


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "row"


def load_compare_config(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"compare config {path} does not exist")
    with path.open() as handle:  # read from the file: a YAML syntax error names it with its line
        data = yaml.safe_load(handle) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key '{unknown[0]}' (keys: {', '.join(sorted(_KEYS))})")
    if not isinstance(data.get("rows"), dict) or not data["rows"]:
        raise ConfigError(f"{path}: 'rows' must map each row name to its overlays")
    for name, row in data["rows"].items():
        extra = sorted(set(row or {}) - {"configs", "override"})
        if extra:
            raise ConfigError(f"{path}: rows.{name}.{extra[0]} is not a row key (keys: configs, override)")
    data.setdefault("score", {})
    return data


def _data(config: dict, out: Path) -> tuple[Path, Path]:
    data = config.get("data") or {}
    if "synthetic" in data:
        from datamodules.synthetic import generate_synthetic_dataset

        options = dict(data["synthetic"] or {})
        root = out / "data"
        paths = generate_synthetic_dataset(root, num_train=0, num_val=0, num_test=int(options.pop("num_clips", 8)),
                                           workers=1, **options)
        return root / "videos", Path(paths["test"])
    if "videos" in data and "truth" in data:
        return Path(data["videos"]), Path(data["truth"])
    raise ConfigError("compare config: 'data' needs 'synthetic: {...}' or both 'videos' and 'truth'")


def table_rows(results: dict[str, dict]) -> list[dict]:
    """Per row: the metrics in percent and their average (the paper's last column)."""
    rows = []
    for name, metrics in results.items():
        values = {label: 100.0 * float(metrics[key]) for label, key in METRICS}
        values["Average"] = sum(values.values()) / len(METRICS)
        rows.append({"row": name, **values})
    return rows


def markdown(rows: list[dict], notes: list[str]) -> str:
    head = ["Auto. annotation", *[m for m, _ in METRICS], "Average"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join([r["row"]] + [f"{r[h]:.1f}" for h in head[1:]]) + " |")
    return "\n".join(lines + [""] + notes) + "\n"


def run_compare(config_path: str | Path, out: str | Path, progress: bool = False) -> dict:
    from annotation.commands.run import run_annotation
    from annotation.commands.score import score_output

    config = load_compare_config(config_path)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    videos, truth = _data(config, out)
    base = [str(p) for p in config.get("base") or []]
    score = {"text_encoder": "minilm", **config["score"]}
    results, details = {}, {}
    for name, row in config["rows"].items():
        row = row or {}
        files = base + [str(p) for p in row.get("configs") or []]
        pipeline = load_config(files, copy.deepcopy(row.get("override")) if row.get("override") else None)
        folder = out / "runs" / _slug(name)
        report = run_annotation(pipeline, files, videos, folder, truth, progress=progress)
        scored = score_output(folder, truth, clips="all", text_encoder=score["text_encoder"],
                              caption_metrics=("METEOR", "CIDEr"), capture=False)
        results[name] = scored["metrics"]
        details[name] = {"configs": files, "override": row.get("override"),
                         "backends": {s: pipeline[s]["backend"] for s in ("stage1", "stage2", "stage3")},
                         "accepted": report["clips"]["accepted"], "rejected": report["clips"]["rejected"],
                         "clips_per_s": {k: v["clips_per_s"] for k, v in report["stages"].items()},
                         "metrics": scored["metrics"]}
    rows = table_rows(results)
    notes = [f"Clips: {len(list(videos.iterdir()))} videos in {videos}, truth {truth}; every truth clip scored "
             "(a rejected clip counts as an empty prediction)."]
    notes += [f"- {n}: Stage 1 `{d['backends']['stage1']}`, Stage 2 `{d['backends']['stage2']}`, Stage 3 "
              f"`{d['backends']['stage3']}`; accepted {d['accepted']}, rejected {d['rejected']}"
              for n, d in details.items()]
    (out / "table6.md").write_text(markdown(rows, notes))
    result = {"config": str(config_path), "videos": str(videos), "truth": str(truth), "rows": rows, "details": details}
    write_json_atomic(out / "table6.json", result)
    return result

