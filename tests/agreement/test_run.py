"""``grove agreement run`` end to end: a user's own scorer through ``class_path``, table.json
in the documented shape, missing weights listed with the key to set."""
import json
import sys

import numpy as np
import pytest
import yaml

from agreement.__main__ import main
from agreement.scorers.base import CaptionScorer


class WordCountScorer(CaptionScorer):
    """A user's own metric: words the caption shares with its first reference."""

    name = "overlap"
    uses_visual = False

    def score(self, items, frames, progress=False):
        return np.array([len(set(i.caption.split()) & set(i.references[0].split())) for i in items], dtype=float)


def _corruptions(path):
    rows = []
    cases = [("a red circle moves up.", 5, 0), ("a red square moves up.", 3, 1),
             ("a blue square moves down.", 1, 3), ("a red circle moves down.", 3, 1)]
    for k, (caption, score, subs) in enumerate(cases):
        rows.append({"key": f"clip#{k}", "video": "clip.mp4", "caption": caption, "score": score, "explanation": "x",
                     "original_caption": "a red circle moves up.", "source_key": "clip",
                     "substitutions": [{"kind": "object"}] * subs})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_run_writes_table_json_and_lists_skipped_metrics(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "agreement_user_metric", sys.modules[__name__])
    _corruptions(tmp_path / "c.jsonl")
    config = {"benchmarks": {"FG": {"reader": "fg_eval", "path": str(tmp_path / "c.jsonl")},
                             "FOIL": {"reader": "synthetic_foil", "path": str(tmp_path / "c.jsonl")},
                             "Missing": {"reader": "fg_eval", "path": str(tmp_path / "nope.jsonl")}},
              "metrics": {"overlap": {"class_path": "agreement_user_metric.WordCountScorer"},
                          "PAC-S": {"kind": "pacs", "towers": {"open_clip": "ViT-B-32-quickgelu", "checkpoint": None}},
                          "judge": {"kind": "judge", "config": ["configs/judge_demo.yaml"], "ckpt_path": None}}}
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(config))
    main(["run", "--config", str(tmp_path / "cfg.yaml"), "--out", str(tmp_path / "out"), "--no-progress"])
    table = json.loads((tmp_path / "out" / "table.json").read_text())
    # overlap with the reference: 5, 4, 2, 4 words vs scores 5, 3, 1, 3 -> perfectly concordant
    assert table["overlap"]["FG"]["kendall_tau_b"] == pytest.approx(1.0)
    assert table["overlap"]["FOIL"]["foil_accuracy"] == 1.0 and table["overlap"]["FOIL"]["foil_pairs"] == 2
    skipped = json.loads((tmp_path / "out" / "skipped.json").read_text())
    assert "metrics.PAC-S.towers.checkpoint" in skipped["metric PAC-S"]
    assert "metrics.judge.ckpt_path" in skipped["metric judge"]
    assert "benchmarks.Missing.path" in skipped["benchmark Missing"]
    assert "| overlap |" in (tmp_path / "out" / "table.md").read_text()


@pytest.mark.slow
def test_synthetic_config_runs_on_tiny_towers(tmp_path):
    config = yaml.safe_load(open("configs/agreement/synthetic.yaml"))
    config["prepare_synthetic"] = {"root": str(tmp_path / "data"), "num_clips": 6, "per_caption": 4}
    config["metrics"] = {k: config["metrics"][k] for k in ("EMScore", "CLIPScore", "CIDEr")}
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(config))
    main(["run", "--config", str(tmp_path / "cfg.yaml"), "--out", str(tmp_path / "out"), "--no-progress"])
    table = json.loads((tmp_path / "out" / "table.json").read_text())
    assert set(table) == {"EMScore", "CLIPScore", "CIDEr"}
    for cells in table.values():
        assert -1 <= cells["Synthetic-FG-Eval"]["kendall_tau_b"] <= 1
        assert 0 <= cells["Synthetic-FOIL"]["foil_accuracy"] <= 1
