"""``cli.py predict`` with configs/overlays/no_video.yaml (``video: false``): the predictions, no annotated MP4."""
import core  # noqa: F401

import json
from pathlib import Path

import pytest

from command_line.grove_cli import cli_main
from tests.fixtures.paths import ROOT
from tests.fixtures.tiny_cli import tiny_cli_args


@pytest.mark.parametrize("switch", [[], ["--config", str(ROOT / "configs" / "overlays" / "no_video.yaml")],
                                    ["--video=false"]], ids=["default", "overlay", "flag"])
def test_predict_without_video_writes_the_predictions_and_no_mp4(tiny_synthetic_root, tmp_path, switch):
    video = sorted((tiny_synthetic_root / "videos").glob("synthtest*.mp4"))[0]
    cli = cli_main(["predict", *tiny_cli_args(tiny_synthetic_root, tmp_path), f"--data.videos={video}", *switch])
    run = Path(cli.trainer.log_dir)
    preds = json.loads((run / "predictions_predict.json").read_text())
    assert sorted(preds) == [f"{video.stem}_0"]
    mp4s = sorted(run.rglob("*.mp4"))
    if switch:
        assert mp4s == []
    else:
        assert [p.name for p in mp4s] == [f"{video.stem}.mp4"]
