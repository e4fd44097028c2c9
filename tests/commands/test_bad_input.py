"""Bad input to a command ends in one ``error:`` line and a non-zero exit, never a traceback: each file
and number option of every command in tests/commands/command_list.py (COMMANDS and
OTHER_PACKAGES_COMMANDS) with a bad value: a missing file, a corrupt JSON/JSONL/pickle/YAML file, a
non-number or out-of-range number. Each case is refused by the parser or the first file read."""
from __future__ import annotations

from core.user_errors import run_command

import importlib
import json

import pytest

from formats.pointing_records import POINTING_DATASETS
from tests.commands.command_list import COMMANDS, OTHER_PACKAGES_COMMANDS


def _files(tmp_path):
    (tmp_path / "broken.json").write_text('{"video": "x.mp4",\n  "fps": }')
    (tmp_path / "empty.json").write_text("{}")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "config.yaml").write_text("benchmarks: {}\nmetrics: {}\n")
    (tmp_path / "broken.jsonl").write_text('{"video": "x.mp4"}\n{"fps": }\n')
    (tmp_path / "broken.pkl").write_bytes(b"\x80\x04garbage")  # a pickle cut short
    (tmp_path / "empty.pkl").write_bytes(b"\x80\x04}\x94.")  # an empty dict
    (tmp_path / "broken.yaml").write_text("a: [1,\n b: }\n")
    (tmp_path / "ckpt").mkdir()
    return tmp_path


# (command, arguments, text the error line must hold); {tmp} is a folder with the files of _files
CASES = [
    ("grove synthetic", ["--workers", "0"], "--workers: must be a positive integer, got '0'"),
    ("grove synthetic", ["--num-train", "-1"], "--num-train: must be an integer >= 0, got '-1'"),
    ("grove synthetic", ["--fps", "abc"], "--fps: must be a positive number, got 'abc'"),
    ("grove synthetic", ["--frame-size", "0"], "--frame-size: must be a positive integer"),
    ("grove synthetic", ["--duration-s", "nan"], "--duration-s: must be a positive number"),
    ("grove synthetic-pointing", ["--out", "{tmp}/p", "--clips", "0"], "--clips: must be a positive integer"),
    ("grove synthetic-pointing", ["--out", "{tmp}/p", "--duration", "-1"], "--duration: must be a positive number"),
    ("grove synthetic-long", ["{tmp}/x.mp4", "--minutes", "0"], "--minutes: must be a positive number"),
    ("grove synthetic-long", ["{tmp}/x.mp4", "--width", "abc"], "--width: must be a positive integer"),
    ("grove synthetic-long", ["{tmp}/x.mp4", "--object-size", "9", "3"], "--object-size: MIN 9 is above MAX 3"),
    ("grove synthetic-long", ["{tmp}/x.mp4", "--clip-seconds", "0"], "--clip-seconds: must be a positive number"),
    ("grove synthetic-long", ["{tmp}/x.mp4", "--no-video", "--width", "224", "--height", "128"],
     "frame_size (224, 128) is too small for objects up to 56 px"),
    ("grove clip-records", ["{tmp}/absent.json"], "absent.json: no such file"),
    ("grove clip-records", ["{tmp}/broken.json"], "broken.json: not valid JSON (Expecting value at line 2, column 10)"),
    ("grove clip-records", ["{tmp}/empty.json"], "empty.json: not the ground truth of grove synthetic-long"),
    ("grove clip-records", ["{tmp}/broken.json", "--clip-seconds", "0"], "--clip-seconds: must be a positive number"),
    ("grove webdemo serve", ["--config", "{tmp}/absent.yaml", "--ckpt-path", "{tmp}"],
     "absent.yaml: no such file (given as --config)"),
    ("grove webdemo serve", ["--config", "{tmp}/config.yaml", "--ckpt-path", "{tmp}/absent.ckpt"],
     "absent.ckpt: no such file or folder"),
    ("grove webdemo serve", ["--config", "x.yaml", "--ckpt-path", "x", "--port", "99999"],
     "--port: must be a port number in [0, 65535]"),
    ("grove webdemo serve", ["--config", "x.yaml", "--ckpt-path", "x", "--samples", "-1"],
     "--samples: must be an integer >= 0"),
    ("grove webdemo timeline", ["{tmp}/absent.json"], "absent.json: no such file"),
    ("grove webdemo timeline", ["{tmp}/empty.json", "--port", "abc"], "--port: must be a port number"),
    ("grove agreement", ["run", "--config", "{tmp}/absent.yaml", "--out", "{tmp}/o"], "absent.yaml: no such file"),
    ("grove baselines", ["--root", "{tmp}/absent"], "--root: {tmp}/absent: no such folder"),
    ("grove convert-cotracker3", ["{tmp}/absent.pth", "--check"], "absent.pth: no such file"),
    ("grove convert-grove", ["{tmp}/absent.bin", "--config", "{tmp}/config.yaml", "--check"],
     "absent.bin: no such file or folder"),
    ("grove convert-grove", ["{tmp}", "--config", "{tmp}/absent.yaml", "--check"],
     "absent.yaml: no such file"),
    ("grove convert-hub-jsonl", ["{tmp}/absent.json", "{tmp}/o.jsonl"], "absent.json: no such file"),
    ("grove convert-hub-jsonl", ["{tmp}/empty.json", "{tmp}/o.txt"], "the output must be a .jsonl"),
    ("grove estimate-memory", ["--gpus", "0"], "--gpus: must be a positive integer"),
    ("grove estimate-memory", ["--capacity-gib", "-80"], "--capacity-gib: must be a positive number"),
    ("grove estimate-memory", ["--config", "{tmp}/absent.yaml"], "absent.yaml: no such file"),
    ("grove estimate-inference-memory", ["--frames", "0"], "--frames: must be a positive integer"),
    ("grove pretrain-judge-vision", ["--steps", "0"], "--steps: must be a positive integer"),
    ("grove pretrain-judge-vision", ["--config", "{tmp}/absent.yaml"], "absent.yaml: no such file"),
    ("grove pretrain-judge-vision", ["--synthetic-root", "{tmp}/absent"], "absent: no such folder"),
    ("grove score-long-video", ["--truth", "{tmp}/absent.json"], "absent.json: no such file"),
    ("grove score-long-video", ["--truth", "{tmp}/broken.json"],
     "broken.json: not valid JSON (Expecting value at line 2, column 10)"),
    ("grove score-long-video", ["--truth", "{tmp}/empty.json", "--clip-seconds", "0"],
     "--clip-seconds: must be a positive number"),
    ("grove score-long-video", ["--truth", "{tmp}/empty.json", "--paraphrase", "2"],
     "--paraphrase: must be a number in [0, 1]"),
    ("grove sweep", ["--config", "{tmp}/absent.yaml", "--preset", "table5", "--out", "{tmp}/s"],
     "absent.yaml: no such file"),
    ("grove sweep", ["--preset", "table5", "--out", "{tmp}/s", "--thresholds", "0.1,abc"],
     "--thresholds: must be a number in [0, 1], got 'abc'"),
    ("grove sweep", ["--axis", "nokey", "--out", "{tmp}/s", "--dry-run"], "--axis 'nokey': expected KEY="),
    ("grove glamm", ["caption", "--folder", "x", "--frames", "0", "clip.mp4"],
     "--frames: must be a positive integer"),
]

# the same for the commands of the feature packages, metrics/ and the export and pretraining scripts
OTHER_CASES = [
    (
        "grove annotate",
        ["run", "--config", "{tmp}/absent.yaml", "--videos", "{tmp}/ckpt", "--out", "{tmp}/o"],
        "absent.yaml",
    ),
    (
        "grove annotate",
        ["run", "--config", "{tmp}/config.yaml", "--videos", "{tmp}/ckpt", "--out", "{tmp}/o", "--limit", "-1"],
        "--limit: must be an integer >= 0",
    ),
    (
        "grove annotate",
        ["run", "--config", "{tmp}/config.yaml", "--videos", "{tmp}/ckpt", "--out", "{tmp}/o", "--batch-size", "abc"],
        "--batch-size: must be a positive integer",
    ),
    ("grove annotate", ["score", "--pred", "{tmp}/absent", "--truth", "{tmp}/empty.json"], "absent"),
    ("grove annotate", ["score", "--pred", "{tmp}", "--truth", "{tmp}/absent.json"], "absent.json"),
    ("grove annotate", ["score", "--pred", "{tmp}", "--truth", "{tmp}/broken.json"], "broken.json"),
    ("grove annotate", ["compare", "--config", "{tmp}/absent.yaml", "--out", "{tmp}/o"], "absent.yaml"),
    (
        "grove annotate",
        ["compare", "--config", "{tmp}/broken.yaml", "--out", "{tmp}/o"],
        'broken.yaml", line 2, column 5',
    ),
    (
        "grove annotate",
        ["detail-captions", "--config", "{tmp}/absent.yaml", "--out", "{tmp}/o.json", "{tmp}/x.jpg"],
        "absent.yaml",
    ),
    (
        "grove annotate",
        [
            "detail-captions",
            "--config",
            "{tmp}/config.yaml",
            "--out",
            "{tmp}/o.json",
            "--frames-per-video",
            "0",
            "{tmp}/x.jpg",
        ],
        "--frames-per-video: must be a positive integer",
    ),
    ("grove judge", ["score", "--pairs", "{tmp}/absent.jsonl", "--out", "{tmp}/o.jsonl"], "absent.jsonl"),
    ("grove judge", ["score", "--pairs", "{tmp}/broken.jsonl", "--out", "{tmp}/o.jsonl"], "broken.jsonl"),
    (
        "grove judge",
        ["score", "--pairs", "{tmp}/broken.jsonl", "--out", "{tmp}/o.jsonl", "--batch-size", "0"],
        "--batch-size: must be a positive integer",
    ),
    (
        "grove judge",
        ["score", "--pairs", "{tmp}/broken.jsonl", "--out", "{tmp}/o.jsonl", "--num-workers", "-1"],
        "--num-workers: must be an integer >= 0",
    ),
    (
        "grove judge",
        ["score", "--pairs", "{tmp}/broken.jsonl", "--out", "{tmp}/o.jsonl", "--concurrency", "x"],
        "--concurrency: must be a positive integer",
    ),
    (
        "grove judge",
        ["predictions", "--gt", "{tmp}/absent.json", "--pred", "{tmp}/empty.json", "--out", "{tmp}/o.json"],
        "absent.json",
    ),
    (
        "grove judge",
        ["predictions", "--gt", "{tmp}/broken.json", "--pred", "{tmp}/empty.json", "--out", "{tmp}/o.json"],
        "broken.json",
    ),
    (
        "grove judge",
        ["predictions", "--gt", "{tmp}/empty.json", "--pred", "{tmp}/broken.json", "--out", "{tmp}/o.json"],
        "broken.json",
    ),
    ("grove judge", ["foil", "--foil-pairs", "{tmp}/absent.jsonl", "--out", "{tmp}/o.json"], "absent.jsonl"),
    (
        "grove judge",
        ["foil", "--foil-pairs", "{tmp}/broken.jsonl", "--out", "{tmp}/o.json"],
        "not valid JSON (Expecting value at line 1, column 9)",
    ),
    ("grove judge", ["foil", "--corruptions", "{tmp}/absent.jsonl", "--out", "{tmp}/o.json"], "absent.jsonl"),
    (
        "grove judge",
        [
            "refine",
            "--videos",
            "{tmp}",
            "--captions",
            "{tmp}/absent.jsonl",
            "--captioner",
            "{tmp}",
            "--out",
            "{tmp}/o.jsonl",
        ],
        "absent.jsonl",
    ),
    (
        "grove judge",
        ["refine", "--videos", "{tmp}", "--captioner", "{tmp}", "--out", "{tmp}/o.jsonl", "--rounds", "-1"],
        "--rounds: must be an integer >= 0",
    ),
    (
        "grove judge",
        [
            "refine",
            "--videos",
            "{tmp}",
            "--captioner",
            "{tmp}",
            "--out",
            "{tmp}/o.jsonl",
            "--captioner-max-pixels",
            "0",
        ],
        "--captioner-max-pixels: must be a positive integer",
    ),
    ("grove evaluate", ["--gt", "{tmp}/absent.json", "--pred", "{tmp}/empty.json"], "absent.json"),
    ("grove evaluate", ["--gt", "{tmp}/broken.json", "--pred", "{tmp}/empty.json"], "broken.json"),
    ("grove evaluate", ["--gt", "{tmp}/broken.pkl", "--pred", "{tmp}/empty.json"], "broken.pkl"),
    (
        "grove evaluate",
        ["--gt", "{tmp}/empty.json", "--pred", "{tmp}/empty.json", "--objectness-threshold", "2"],
        "--objectness-threshold: must be a number in [0, 1]",
    ),
    (
        "grove anet-entities",
        ["--reference", "{tmp}/absent.json", "--pred", "{tmp}/empty.json"],
        "absent.json",
    ),
    (
        "grove anet-entities",
        ["--reference", "{tmp}/broken.json", "--pred", "{tmp}/empty.json"],
        "broken.json",
    ),
    (
        "grove anet-entities",
        ["--reference", "{tmp}/empty.json", "--pred", "{tmp}/empty.json", "--iou-threshold", "1.5"],
        "--iou-threshold: must be a number in [0, 1]",
    ),
    ("grove vidstg", ["--annotations", "{tmp}/absent.json", "--pred", "{tmp}/empty.json"], "absent.json"),
    ("grove vidstg", ["--annotations", "{tmp}/broken.json", "--pred", "{tmp}/empty.json"], "broken.json"),
    (
        "grove vidstg",
        ["--annotations", "{tmp}/empty.json", "--pred", "{tmp}/broken.json"],
        "not valid JSON (Expecting value at line 2, column 10)",
    ),
    ("grove mevis", ["--split", "{tmp}", "--pred", "{tmp}/empty.json"], "meta_expressions.json"),
    (
        "grove pointing",
        ["--gt", "{tmp}/absent.pkl", "--pred", "{tmp}/empty.json", "--dataset", "{dataset}"],
        "absent.pkl",
    ),
    (
        "grove pointing",
        ["--gt", "{tmp}/broken.pkl", "--pred", "{tmp}/empty.json", "--dataset", "{dataset}"],
        "broken.pkl",
    ),
    (
        "grove pointing",
        ["--gt", "{tmp}/empty.pkl", "--pred", "{tmp}/broken.json", "--dataset", "{dataset}"],
        "broken.json",
    ),
    (
        "grove threshold-sweep",
        ["--gt", "{tmp}/absent.json", "--pred", "a={tmp}/empty.json", "--out", "{tmp}/s"],
        "absent.json",
    ),
    (
        "grove threshold-sweep",
        ["--gt", "{tmp}/broken.json", "--pred", "a={tmp}/empty.json", "--out", "{tmp}/s"],
        "broken.json",
    ),
    (
        "grove threshold-sweep",
        ["--gt", "{tmp}/empty.json", "--pred", "a={tmp}/absent.json", "--out", "{tmp}/s"],
        "absent.json",
    ),
    (
        "grove threshold-sweep",
        ["--gt", "{tmp}/empty.json", "--pred", "a={tmp}/empty.json", "--out", "{tmp}/s", "--thresholds", "0.1,abc"],
        "--thresholds: must be a number in [0, 1], got 'abc'",
    ),
    ("grove pretrain-towers", ["--config", "{tmp}/absent.yaml"], "absent.yaml"),
    ("grove pretrain-towers", ["--steps", "0"], "--steps: must be a positive integer"),
    ("grove pretrain-towers", ["--lr", "abc"], "--lr: must be a positive number"),
    ("grove pretrain-towers", ["--lr", "-1"], "--lr: must be a positive number"),
    ("grove pretrain-towers", ["--box-weight", "-1"], "--box-weight: must be a number >= 0"),
    ("grove pretrain-towers", ["--threads", "0"], "--threads: must be a positive integer"),
    (
        "grove export",
        ["--config", "{tmp}/absent.yaml", "--ckpt-path", "{tmp}/ckpt", "--out", "{tmp}/e"],
        "absent.yaml",
    ),
    (
        "grove export",
        [
            "--config",
            "{tmp}/config.yaml",
            "--ckpt-path",
            "{tmp}/ckpt",
            "--out",
            "{tmp}/e",
            "--metrics",
            "{tmp}/broken.json",
        ],
        "broken.json",
    ),
    (
        "grove export",
        [
            "--config",
            "{tmp}/config.yaml",
            "--ckpt-path",
            "{tmp}/ckpt",
            "--out",
            "{tmp}/e",
            "--metrics",
            "{tmp}/absent.json",
        ],
        "absent.json",
    ),
    (
        "grove export",
        ["--config", "{tmp}/config.yaml", "--ckpt-path", "{tmp}/ckpt", "--out", "{tmp}/e", "--max-shard-size", "lots"],
        "--max-shard-size",
    ),
]
OTHER_CASES += [
    ("grove judge corrupt", ["--records", "{tmp}/absent.json", "--out", "{tmp}/o.jsonl"], "absent.json"),
    ("grove judge corrupt", ["--records", "{tmp}/broken.json", "--out", "{tmp}/o.jsonl"], "broken.json"),
    ("grove judge corrupt", ["--records", "{tmp}/broken.pkl", "--out", "{tmp}/o.jsonl"], "broken.pkl"),
    (
        "grove judge corrupt",
        ["--records", "{tmp}/empty.json", "--out", "{tmp}/o.jsonl", "--per-caption", "0"],
        "--per-caption: must be a positive integer",
    ),
    (
        "grove judge corrupt",
        ["--records", "{tmp}/empty.json", "--out", "{tmp}/o.jsonl", "--climb-decay", "abc"],
        "--climb-decay: must be a number in [0, 1]",
    ),
    (
        "grove judge corrupt",
        ["--records", "{tmp}/empty.json", "--out", "{tmp}/o.jsonl", "--max-climb", "-1"],
        "--max-climb: must be an integer >= 0",
    ),
]
CASES += [
    ("grove ground", ["{tmp}/absent.mp4", "--query", "a", "--config", "{tmp}/config.yaml", "--ckpt-path", "{tmp}/ckpt",
                      "--out", "{tmp}/o"], "absent.mp4: no such file"),
    ("grove ground", ["{tmp}/broken.json", "--query", "a", "--config", "{tmp}/absent.yaml", "--ckpt-path",
                      "{tmp}/ckpt", "--out", "{tmp}/o"], "absent.yaml: no such file"),
    ("grove ground", ["{tmp}/broken.json", "--query", "a", "--config", "{tmp}/config.yaml", "--ckpt-path",
                      "{tmp}/ckpt", "--out", "{tmp}/o", "--clip-seconds", "0"],
     "--clip-seconds: must be a positive number"),
    ("grove ground", ["{tmp}/broken.json", "--query", "a", "--config", "{tmp}/config.yaml", "--ckpt-path",
                      "{tmp}/ckpt", "--out", "{tmp}/o", "--objectness-threshold", "2"],
     "--objectness-threshold: must be a number in [0, 1]"),
    ("grove referring", ["synthetic-set", "--annotations", "{tmp}/absent.json", "--out", "{tmp}/s.json"],
     "absent.json: no such file"),
    ("grove referring", ["synthetic-set", "--annotations", "{tmp}/broken.json", "--out", "{tmp}/s.json",
                         "--distractors", "-1"], "--distractors: must be an integer >= 0"),
    ("grove referring", ["benchmark", "--benchmark", "mevis", "--meta", "{tmp}/broken.json", "--frames",
                         "{tmp}/absent", "--config", "{tmp}/config.yaml", "--ckpt-path", "{tmp}/ckpt", "--out",
                         "{tmp}/o"], "absent: no such folder"),
    ("grove referring", ["score-ref-youtube-vos", "--meta", "{tmp}/absent.json", "--annotations", "{tmp}",
                         "--pred", "{tmp}"], "absent.json: no such file"),
    ("grove live", ["{tmp}/x.mp4", "--config", "{tmp}/absent.yaml", "--out", "{tmp}/o"], "absent.yaml: no such file"),
    ("grove live", ["{tmp}/x.mp4", "--config", "{tmp}/config.yaml", "--out", "{tmp}/o", "--clip-seconds", "0"],
     "--clip-seconds: must be a positive number"),
    ("grove live", ["{tmp}/x.mp4", "--config", "{tmp}/config.yaml", "--out", "{tmp}/o", "--reconnects", "-2"],
     "--reconnects: must be an integer >= 0"),
    ("grove live", ["{tmp}/x.mp4", "--config", "{tmp}/config.yaml", "--out", "{tmp}/o", "--stall-timeout", "abc"],
     "--stall-timeout: must be a positive number"),
    ("grove live", ["{tmp}/x.mp4", "--config", "{tmp}/config.yaml", "--out", "{tmp}/o", "--listen", "0"],
     "--listen: must be a positive number"),
    ("grove live", ["http://127.0.0.1:9/x.ts", "--config", "{tmp}/config.yaml", "--out", "{tmp}/o", "--listen", "5"],
     "listening is for rtsp:// and tcp:// sources, not 'http://127.0.0.1:9/x.ts'"),
]
OTHER_CASES += [
    (
        "grove annotate",
        ["detail-captions", "--config", "{tmp}/broken.yaml", "--out", "{tmp}/o.json", "{tmp}/x.jpg"],
        'broken.yaml", line 2, column 5',
    ),
]


@pytest.mark.parametrize("command,args,expected", CASES + OTHER_CASES,
                         ids=[f"{c} {' '.join(a)}" for c, a, _ in CASES + OTHER_CASES])
def test_bad_input_is_one_error_line(command, args, expected, tmp_path, capsys):
    folder = _files(tmp_path)
    module, function, prefix = {**COMMANDS, **OTHER_PACKAGES_COMMANDS}[command]
    main = getattr(importlib.import_module(module), function)
    dataset = sorted(POINTING_DATASETS)[0]
    argv = [*prefix, *(a.replace("{tmp}", str(folder)).replace("{dataset}", dataset) for a in args)]
    with pytest.raises(SystemExit) as exit_info:
        run_command(main, argv)
    code = exit_info.value.code
    printed = capsys.readouterr().err + (f"{code}\n" if isinstance(code, str) else "")
    assert code not in (0, None)
    assert "Traceback" not in printed
    errors = [line for line in printed.splitlines() if "error:" in line]
    assert len(errors) == 1, printed
    assert expected.replace("{tmp}", str(folder)) in errors[0]
    assert code == 2 if errors[0].startswith("usage") or ": error: argument" in errors[0] else True


def test_a_missing_folder_of_a_long_video_output_is_created(tmp_path):
    from command_line.synthetic_data import synthetic_long_main

    truth = synthetic_long_main([str(tmp_path / "new" / "deeper" / "x.mp4"), "--no-video", "--minutes", "0.05",
                                 "--width", "320", "--height", "180", "--fps", "10", "--objects", "2"])
    written = json.loads((tmp_path / "new" / "deeper" / "x.json").read_text())
    assert written["num_frames"] == truth["num_frames"] == 30
    assert (tmp_path / "new" / "deeper" / "x_clips.json").is_file()
    assert not (tmp_path / "new" / "deeper" / "x.mp4").exists()


def test_every_command_has_a_bad_input_case():
    covered = {command for command, _, _ in CASES + OTHER_CASES}
    assert sorted((set(COMMANDS) | set(OTHER_PACKAGES_COMMANDS)) - covered) == []
