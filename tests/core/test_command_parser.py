"""The one output guard: every command's parser refuses an output that is one of its inputs."""
from core.command_parser import CommandParser

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agreement", "annotation", "callbacks", "command_line", "core", "datamodules", "experiments", "formats",
            "glamm", "judge", "lightning_modules", "longvideo", "metrics", "models", "sizing", "sweeps",
            "webdemo")


def test_glamm_baseline_refuses_its_ground_truth_as_output_before_loading_anything(tmp_path, capsys):
    from glamm.commands import main

    gt = tmp_path / "gt.json"
    gt.write_text('{"kept": true}')
    with pytest.raises(SystemExit, match=r"--out .*gt.json is --gt .*gt.json, an input of this command"):
        main(["baseline", "--folder", str(tmp_path / "no_glamm"), "--gt", str(gt), "--videos", str(tmp_path / "v"),
              "--out", str(gt)])
    assert gt.read_text() == '{"kept": true}'


def test_glamm_caption_refuses_zero_frames(capsys):
    from glamm.commands import main

    with pytest.raises(SystemExit):
        main(["caption", "--folder", "x", "--frames", "0", "clip.mp4"])
    assert "argument --frames: must be a positive integer, got '0'" in capsys.readouterr().err


def test_glamm_caption_refuses_to_draw_over_an_input_image(tmp_path):
    from glamm.commands import main

    image = tmp_path / "frame.jpg"
    image.write_bytes(b"not decoded: refused first")
    with pytest.raises(SystemExit, match=r"--out writes .*frame.jpg is an input .*frame.jpg"):
        main(["caption", "--folder", str(tmp_path / "no_glamm"), "--out", str(tmp_path), str(image)])
    assert image.read_bytes() == b"not decoded: refused first"


def test_roles_are_checked_in_sub_commands_groups_and_lists(tmp_path):
    parser = CommandParser(prog="tool")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    group = run.add_argument_group("model")
    group.add_argument("--config", action="append", role="input")
    choice = run.add_mutually_exclusive_group()
    choice.add_argument("--out", role="output")
    choice.add_argument("--check", action="store_true")
    run.add_argument("--data", role="input")
    config_b, data = tmp_path / "b.yaml", tmp_path / "data"
    config_b.write_text("x: 1")
    data.mkdir()
    with pytest.raises(SystemExit, match=r"tool run: error: --out .*b.yaml is --config .*b.yaml"):
        parser.parse_args(["run", "--config", "a.yaml", "--config", str(config_b), "--out", str(config_b)])
    with pytest.raises(SystemExit, match=r"--out .*report.json lies inside --data"):
        parser.parse_args(["run", "--data", str(data), "--out", str(data / "report.json")])
    args = parser.parse_args(["run", "--data", str(data), "--out", str(tmp_path / "report.json")])
    assert args.out == str(tmp_path / "report.json")
    with pytest.raises(ValueError, match="role must be one of"):
        parser.add_argument("--x", role="both")


def _command_sources():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name != "command_parser.py":
                yield path


def test_every_command_of_the_project_uses_the_guarded_parser():
    """A property of the code base: no command builds a plain argparse parser, and every option
    that names a file the command writes (``--out``, ``--write-*``) is declared an output."""
    plain, undeclared = [], []
    for path in _command_sources():
        text = path.read_text()
        if "ArgumentParser(" in text and "CommandParser" not in text:
            plain.append(str(path.relative_to(ROOT)))
        for node in ast.walk(ast.parse(text)):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument" and node.args):
                continue
            first = node.args[0]
            if isinstance(first, ast.Constant) and re.fullmatch(r"--(out|output|write-[a-z-]+)", str(first.value)):
                roles = [k.value.value for k in node.keywords if k.arg == "role"]
                if roles != ["output"]:
                    undeclared.append(f"{path.relative_to(ROOT)}:{node.lineno} {first.value}")
    assert not plain, f"commands with a plain argparse parser: {plain}"
    assert not undeclared, f"output options not declared role='output': {undeclared}"
