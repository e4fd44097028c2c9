"""Annotation runs: bad HowToCaption spans are reported by video and span; one run holds its output."""
import json
from pathlib import Path

import pytest

from annotation.clips import BadSpan, clips_from_timestamps, find_videos, video_id_of
from annotation.commands.run import run_annotation
from annotation.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs" / "annotation"


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    from datamodules.synthetic import generate_synthetic_dataset

    root = tmp_path_factory.mktemp("spans")
    generate_synthetic_dataset(root, num_train=0, num_val=0, num_test=1, seed=0, workers=1, duration_s=2.0)
    return root / "videos"


def _stamps(videos, tmp_path):
    vid = video_id_of(find_videos(videos)[0])
    path = tmp_path / "howtocaption.json"
    path.write_text(json.dumps({vid: {"start": [-3.0, 1.5, 0.0, 5.0], "end": [1.0, 0.5, 1.0, 6.0],
                                      "text": ["a", "b", "c", "d"]}}))
    return vid, path


def test_bad_spans_are_reported_by_video_and_span_in_report_json(videos, tmp_path):
    vid, path = _stamps(videos, tmp_path)
    config = load_config([CONFIGS / "synthetic.yaml"], {"clips": {"timestamps": str(path), "min_seconds": 0.5}})
    report = run_annotation(config, [], videos, tmp_path / "out", limit=0, progress=False)
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    assert written["bad_spans"] == report["bad_spans"] and written["clips"]["bad_spans"] == 3
    assert set(written["bad_spans"]) == {f"{vid}_0", f"{vid}_1", f"{vid}_3"}
    assert f"video '{vid}', span 0 [-3 s, 1 s) starts at -3 s, before the video's start; left out " \
           "(clips.clamp_spans: true clamps it to 0 s)" in written["bad_spans"][f"{vid}_0"]
    assert "span 1 [1.5 s, 0.5 s) starts at 1.5 s, not before its end at 0.5 s; left out" in written["bad_spans"][
        f"{vid}_1"]
    assert "span 3 [5 s, 6 s) starts at 5 s, after the video's end at 2 s" in written["bad_spans"][f"{vid}_3"]
    assert written["skipped_corrupt"] == {}


def test_a_span_before_zero_is_clamped_only_when_the_option_says_so(videos, tmp_path):
    vid, path = _stamps(videos, tmp_path)
    specs, skipped = clips_from_timestamps(videos, path, min_seconds=0.5)
    assert [s.clip_id for s in specs] == ["2"]
    specs, skipped = clips_from_timestamps(videos, path, min_seconds=0.5, clamp_spans=True)
    assert [(s.clip_id, s.start_frame, s.end_frame) for s in specs] == [("0", 0, 24), ("2", 0, 24)]
    clamped = [s for s in skipped if isinstance(s, BadSpan) and s.clamped]
    assert [s.key for s in clamped] == [f"{vid}_0"] and "clamped to 0 s (clips.clamp_spans)" in clamped[0].reason
    with pytest.raises(ConfigError, match="clips.clamp_spans must be true or false"):
        load_config([CONFIGS / "synthetic.yaml"], {"clips": {"timestamps": str(path), "clamp_spans": "yes"}})


def test_a_second_run_on_one_output_folder_is_refused_naming_it(videos, tmp_path):
    from core.folder_lock import FolderInUseError, hold_folder

    import os
    import subprocess
    import sys

    from annotation.__main__ import main

    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        out.mkdir()
        (out / ".lock").write_text(json.dumps({"pid": holder.pid, "command": "grove annotate run"}))
        with pytest.raises(SystemExit, match=rf"{out} is in use by another run \(process {holder.pid}.*lock file "
                                             rf"{out}/.lock\)"):
            main(["run", "--config", str(CONFIGS / "synthetic.yaml"), "--videos", str(videos), "--out", str(out),
                  "--limit", "0", "--no-progress"])
    finally:
        holder.kill()
        holder.wait()
    # the holder is gone: its lock is stale, taken over, and released when the run ends
    main(["run", "--config", str(CONFIGS / "synthetic.yaml"), "--videos", str(videos), "--out", str(out),
          "--limit", "0", "--no-progress"])
    assert (out / "report.json").is_file() and not (out / ".lock").exists()
    with hold_folder(out, "first") as lock:
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        child = subprocess.run([sys.executable, "-c", f"from core.folder_lock import hold_folder\n"
                                f"with hold_folder({str(out)!r}): pass"], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert child.returncode != 0 and "FolderInUseError" in child.stderr and f"process {os.getpid()}" in child.stderr
    assert not lock.exists()
    with pytest.raises(RuntimeError, match="boom"), hold_folder(out):
        raise RuntimeError("boom")
    assert not (out / ".lock").exists()
    assert issubclass(FolderInUseError, RuntimeError)


def test_a_rerun_resumes_only_a_folder_made_from_the_same_inputs(videos, tmp_path):
    from annotation.commands.run import RUN_INPUTS

    out = tmp_path / "out"
    config = load_config([CONFIGS / "synthetic.yaml"])
    run_annotation(config, [], videos, out, limit=0, progress=False)
    assert json.loads((out / RUN_INPUTS).read_text())["videos"] == str(videos.resolve())
    retry = load_config([CONFIGS / "synthetic.yaml"], {"engine": {"batch_size": 3}, "max_retries": 5})
    run_annotation(retry, [], videos, out, limit=0, progress=False)  # the stages' settings may change
    other = load_config([CONFIGS / "synthetic.yaml"], {"clips": {"seconds": 1.0}})
    with pytest.raises(ValueError, match=rf"--out {out} holds annotations made from other inputs \(clips.seconds: "
                                         r"None then, 1.0 now\)"):
        run_annotation(other, [], videos, out, limit=0, progress=False)
    with pytest.raises(ValueError, match=r"\(videos: .* then, .* now\)"):
        run_annotation(config, [], videos.parent, out, limit=0, progress=False)
    assert not (out / ".lock").exists()
