"""``grove annotate run`` writes only into a folder of its own: a user's folder is refused."""
from pathlib import Path

import pytest

from annotation.commands.run import run_annotation
from annotation.config import load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "annotation"


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    from datamodules.synthetic import generate_synthetic_dataset

    root = tmp_path_factory.mktemp("videos")
    generate_synthetic_dataset(root, num_train=0, num_val=0, num_test=1, seed=0, workers=1, duration_s=2.0)
    return root / "videos"


def test_a_foreign_folder_is_refused_and_its_own_is_resumed(videos, tmp_path):
    config = load_config([CONFIGS / "synthetic.yaml"])
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    with pytest.raises(ValueError, match=rf"--out {foreign} is not empty and was not written by grove "
                                         r"annotate run \(it holds notes.txt\); choose a new or empty folder$"):
        run_annotation(config, [], videos, foreign, limit=0, progress=False)
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]
    out = tmp_path / "out"
    run_annotation(config, [], videos, out, limit=0, progress=False)
    run_annotation(config, [], videos, out, limit=0, progress=False)  # its own folder: resumed
    (out / ".grove_output.json").unlink()  # a folder written before the marker: known by its run_inputs.json
    run_annotation(config, [], videos, out, limit=0, progress=False)
