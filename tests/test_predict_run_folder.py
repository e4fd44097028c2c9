"""Predict writes only into a run folder it created or marked, and never through a link."""
from core.output_folder import OutputFolderError

import os

import pytest

from cli import cli_main
from tests.fixtures.tiny_cli import tiny_cli_args

pytestmark = pytest.mark.slow


def _predict(root, save_dir, *extra):
    return cli_main(["predict", *tiny_cli_args(root, save_dir, "--trainer.logger.init_args.version=mine", *extra)])


def test_predict_refuses_a_folder_of_user_files_before_any_work(tiny_synthetic_root, tmp_path):
    folder = tmp_path / "demo" / "mine"
    folder.mkdir(parents=True)
    files = {"config.yaml": "my: config\n", "predictions_predict.json": "{\"mine\": 1}", "notes.txt": "keep"}
    for name, text in files.items():
        (folder / name).write_text(text)
    with pytest.raises(OutputFolderError, match="notes.txt"):
        _predict(tiny_synthetic_root, tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == sorted(files)  # nothing written
    assert {name: (folder / name).read_text() for name in files} == files  # nothing replaced


def test_predict_owns_its_folder_and_reruns_into_it(tiny_synthetic_root, tmp_path):
    _predict(tiny_synthetic_root, tmp_path)
    folder = tmp_path / "demo" / "mine"
    assert (folder / "predictions_predict.json").is_file() and (folder / ".grove_output.json").is_file()
    _predict(tiny_synthetic_root, tmp_path)  # its own marked folder: accepted
    assert (folder / "predictions_predict.json").is_file()


@pytest.mark.parametrize("name", ["config.yaml", "predictions_test.json"])
def test_a_link_in_the_run_folder_is_refused_at_setup(tiny_synthetic_root, tmp_path, name):
    folder = tmp_path / "demo" / "mine"
    folder.mkdir(parents=True)
    target = tmp_path / "elsewhere.txt"
    target.write_text("untouched")
    os.symlink(target, folder / name)
    with pytest.raises(OutputFolderError, match=name):
        cli_main(["test", *tiny_cli_args(tiny_synthetic_root, tmp_path, "--trainer.logger.init_args.version=mine")])
    assert target.read_text() == "untouched"
    assert not (folder / "predictions_test.json").exists() or (folder / "predictions_test.json").is_symlink()
