"""A command writes only into its own folder: foreign folders refused, links never followed out."""
from core.output_folder import (
    MARKER_NAME,
    OutputFolderError,
    claim_output_folder,
    output_file,
    write_output_folder,
)

import json

import pytest


def _writer(files: dict):
    def write(folder):
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
    return write


def test_a_foreign_folder_is_refused_and_left_as_it_was(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "README.md").write_text("my notes")
    (out / "config.json").write_text("{}")
    with pytest.raises(OutputFolderError, match=rf"--out {out} is not empty and was not written by export "
                                                r"\(it holds README.md, config.json\).*--overwrite"):
        write_output_folder(out, "export", _writer({"README.md": "card", "config.json": '{"a": 1}'}))
    assert (out / "README.md").read_text() == "my notes" and (out / "config.json").read_text() == "{}"
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json"]
    (out / "notes.txt").write_text("keep")
    write_output_folder(out, "export", _writer({"README.md": "card"}), overwrite=True)
    assert (out / "README.md").read_text() == "card" and (out / "notes.txt").read_text() == "keep"


def test_a_folder_of_its_own_is_rewritten_and_stale_files_go(tmp_path):
    out = tmp_path / "exported"
    write_output_folder(out, "export", _writer({"model-1-of-2.bin": "a", "model-2-of-2.bin": "b", "c.json": "1"}))
    write_output_folder(out, "export", _writer({"model.bin": "ab", "c.json": "2"}))
    assert sorted(p.name for p in out.iterdir() if p.name != MARKER_NAME) == ["c.json", "model.bin"]
    assert json.loads((out / MARKER_NAME).read_text())["files"] == ["c.json", "model.bin"]
    with pytest.raises(OutputFolderError, match=r"holds the output of another command \(export\)"):
        claim_output_folder(out, "annotation run")


def test_a_link_out_of_the_folder_is_never_written_through(tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("someone else's file")
    out = tmp_path / "exported"
    write_output_folder(out, "export", _writer({"config.json": "{}"}))
    (out / "README.md").symlink_to(outside)
    with pytest.raises(OutputFolderError, match=rf"{out}/README.md is a symbolic link \(to {outside}\)"):
        write_output_folder(out, "export", _writer({"config.json": '{"new": 1}', "README.md": "card"}))
    assert outside.read_text() == "someone else's file"
    assert (out / "config.json").read_text() == "{}"  # one refusal moves nothing
    assert not [p for p in out.iterdir() if p.name.startswith(".staging")]
    sub = tmp_path / "elsewhere"
    sub.mkdir()
    (out / "tokenizer").symlink_to(sub)
    with pytest.raises(OutputFolderError, match=r"tokenizer is a symbolic link"):
        output_file(out, "tokenizer/vocab.json")
    with pytest.raises(OutputFolderError, match=r"not a path inside"):
        output_file(out, "../x.json")


def test_a_file_is_not_an_output_folder(tmp_path):
    path = tmp_path / "f"
    path.write_text("x")
    with pytest.raises(OutputFolderError, match=r"is a file, not a folder"):
        claim_output_folder(path, "export")


def test_export_refuses_a_foreign_folder_before_building_anything(tmp_path, capsys):
    from command_line.export_model import main

    out = tmp_path / "out"
    out.mkdir()
    (out / "README.md").write_text("my notes")
    ckpt = tmp_path / "fake.ckpt"
    ckpt.write_bytes(b"")
    with pytest.raises(SystemExit) as exit_:
        main(["--config", "configs/demo.yaml", "--ckpt_path", str(ckpt), "--out", str(out)])
    assert exit_.value.code == 2
    assert f"--out {out} is not empty" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["README.md"] and (out / "README.md").read_text() == "my notes"
