"""The demo's tower stage reruns when the seed the towers would start from changes."""
from __future__ import annotations

import json

from command_line.demo import TOWER_BOX_WEIGHT, TOWER_STEPS, seed_of, stale_towers


def test_towers_of_another_seed_are_not_reused(tmp_path):
    record = tmp_path / "pretext.json"
    recipe = {"steps": TOWER_STEPS, "box_weight": TOWER_BOX_WEIGHT}
    record.write_text(json.dumps({**recipe, "overrides": []}))
    assert stale_towers(tmp_path, seed=0) is None
    assert "'seed': 0" in stale_towers(tmp_path, seed=1)
    record.write_text(json.dumps({**recipe, "overrides": ["--trainer.max_steps=5", "--seed_everything=1"]}))
    assert stale_towers(tmp_path, seed=1) is None and stale_towers(tmp_path, seed=0) is not None


def test_seed_of_reads_the_last_override_or_the_config():
    assert seed_of([]) == 0  # configs/demo.yaml
    assert seed_of(["--seed_everything=3", "--x=1"]) == 3
    assert seed_of(["--seed_everything", "4", "--seed_everything=5"]) == 5
