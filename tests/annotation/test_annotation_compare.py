"""``grove annotate compare`` (Table 6) on generated synthetic clips: every row is run and scored
against the truth, the table is written in the paper's layout, and a bad config is named."""
import json

import pytest
import yaml

from annotation.__main__ import main
from annotation.commands.compare import table_rows


def test_table_rows_are_percent_and_their_average():
    rows = table_rows({"Proposed": {"METEOR": 0.123, "CIDEr": 0.317, "AP50": 0.269, "recall": 0.193}})
    assert rows[0]["METEOR"] == pytest.approx(12.3) and rows[0]["Average"] == pytest.approx(22.55)


@pytest.mark.slow  # three pipeline runs, each scored with METEOR and CIDEr (Java)
def test_compare_runs_every_row_on_synthetic_clips(tmp_path):
    config = {
        "data": {"synthetic": {"num_clips": 2, "seed": 3, "duration_s": 2.0}},
        "base": ["configs/annotation/synthetic.yaml", "configs/annotation/synthetic_oracle.yaml"],
        "rows": {"Proposed": {}, "Alt. Stage 2": {"configs": ["configs/annotation/alt_stage2_captions.yaml"]},
                 "Alt. Stage 3 (oracle tracker)": {"configs": ["configs/annotation/alt_stage3_oracle_tracker.yaml"]}},
        "score": {"text_encoder": "exact"},
    }
    (tmp_path / "t6.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = main(["compare", "--config", str(tmp_path / "t6.yaml"), "--out", str(tmp_path / "out"), "--no-progress"])
    rows = {r["row"]: r for r in result["rows"]}
    assert list(rows) == ["Proposed", "Alt. Stage 2", "Alt. Stage 3 (oracle tracker)"]
    # noise-free Stage 1: the language Stage 3 and the oracle tracker both reproduce the true boxes
    assert rows["Proposed"]["AP50"] == pytest.approx(100.0) and rows["Proposed"]["Recall"] == pytest.approx(100.0)
    assert rows["Alt. Stage 3 (oracle tracker)"]["AP50"] == pytest.approx(100.0)
    assert rows["Alt. Stage 2"]["CIDEr"] < rows["Proposed"]["CIDEr"]
    table = (tmp_path / "out" / "table6.md").read_text()
    assert table.startswith("| Auto. annotation | METEOR | CIDEr | AP50 | Recall | Average |")
    assert json.loads((tmp_path / "out" / "table6.json").read_text())["rows"] == result["rows"]
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**config, "rowz": {}}))
    with pytest.raises(SystemExit, match="unknown key 'rowz'"):
        main(["compare", "--config", str(tmp_path / "bad.yaml"), "--out", str(tmp_path / "bad")])
