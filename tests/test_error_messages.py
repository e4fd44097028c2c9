"""Bad inputs give a message naming the file or key and what is wrong, not a later, unrelated traceback."""
from __future__ import annotations

import shutil

import pytest

from cli import cli_main
from datamodules.grounded_datamodule import GroundedVideoDataModule
from formats.records import read_records
from tests.fixtures.paths import ROOT

DEMO = str(ROOT / "configs" / "demo.yaml")
RANDOM_TOWERS = ["--model.init_args.global_encoder.checkpoint=null",
                 "--model.init_args.grounding_encoder.checkpoint=null"]


def _datamodule(annotations, video_root):
    return GroundedVideoDataModule(train_annotations=str(annotations), video_root=str(video_root), num_workers=0,
                                   global_image_size=32, grounding_image_size=64)


def test_an_empty_annotation_file_is_named(tmp_path, tiny_synthetic_root):
    (tmp_path / "train.json").write_text("[]")
    with pytest.raises(ValueError, match=r"data\.init_args\.train_annotations: .*train\.json holds no clips"):
        _datamodule(tmp_path / "train.json", tiny_synthetic_root / "videos").setup("fit")


def test_a_split_whose_videos_are_all_missing_names_the_video_root(tmp_path, tiny_synthetic_root):
    annotations = tiny_synthetic_root / "annotations" / "train.json"
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"data\.init_args\.video_root: none of the train split's videos is "
                                                r"under .*empty \(6 of its 6 clips checked"):
        _datamodule(annotations, tmp_path / "empty").setup("fit")
    # some missing: the run goes on, and those clips are skipped and counted while it runs
    videos = tmp_path / "some"
    shutil.copytree(tiny_synthetic_root / "videos", videos)
    fnames = [r.video_fname for r in read_records(annotations)]
    for fname in fnames[1:]:
        (videos / fname).unlink()
    dm = _datamodule(annotations, videos)
    dm.setup("fit")
    assert dm.datasets["train"].missing_videos() == (6, fnames[1:])


def test_predict_with_missing_videos_stops_before_building_the_model(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"data\.videos: '.*nowhere/\*\.mp4' matches no file, folder or glob"):
        cli_main(["predict", "--config", DEMO, *RANDOM_TOWERS, f"--data.init_args.videos={tmp_path}/nowhere/*.mp4",
                  f"--trainer.logger.init_args.save_dir={tmp_path}"])


def test_evaluating_or_predicting_without_a_checkpoint_warns_loudly(tmp_path):
    from command_line.grove_cli import untrained_weights_warning

    with pytest.warns(UserWarning, match=r"predict WITHOUT --ckpt_path: .* RANDOMLY INITIALISED"):
        with pytest.raises(FileNotFoundError):  # stops early (no videos): the warning comes first
            cli_main(["predict", "--config", DEMO, *RANDOM_TOWERS, f"--data.init_args.videos={tmp_path}/none/*.mp4",
                      f"--trainer.logger.init_args.save_dir={tmp_path}"])
    assert untrained_weights_warning("fit", None) is None
    assert untrained_weights_warning("test", "runs/x/last.ckpt") is None
    assert "test WITHOUT --ckpt_path" in untrained_weights_warning("test", None)


def test_the_judge_data_generator_names_an_empty_record_file(tmp_path):
    from judge.data.corruption.generator import generate_corruptions, main
    from judge.data.corruption.rule_backend import RuleBackend

    (tmp_path / "records.json").write_text("[]")
    with pytest.raises(SystemExit, match=r"records\.json: no captions to corrupt"):
        main(["--records", str(tmp_path / "records.json"), "--out", str(tmp_path / "out.jsonl")])
    with pytest.raises(ValueError, match="empty record list"):
        generate_corruptions([], RuleBackend())
