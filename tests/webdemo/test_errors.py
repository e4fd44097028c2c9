"""Error paths: every unusable upload or setting is a sentence for the page, never a stack trace."""
import logging
from pathlib import Path

import av
import numpy as np
import pytest

from formats.video_writer import write_video
from webdemo.predictor import Settings
from webdemo.upload import UploadError, check_video
from webdemo.workspace import Workspace


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    frames = np.random.default_rng(0).integers(0, 256, (12, 32, 48, 3), dtype=np.uint8)
    return write_video(tmp_path_factory.mktemp("clip") / "clip.mp4", frames, 25.0)


def audio_only(path: Path) -> Path:
    with av.open(str(path), "w", format="wav") as container:
        stream = container.add_stream("pcm_s16le", rate=8000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), dtype=np.int16), format="s16", layout="mono")
        frame.sample_rate = 8000
        container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return path


def written(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_a_readable_video_passes_with_its_size_and_rate(clip):
    info = check_video(clip)
    assert (info.width, info.height, info.num_frames, info.fps) == (48, 32, 12, 25.0)


@pytest.mark.parametrize("make, message", [
    (lambda d: None, "No video yet"),
    (lambda d: d / "gone.mp4", "'gone.mp4' did not arrive"),
    (lambda d: written(d / "empty.mp4", b""), "'empty.mp4' is an empty file"),
    (lambda d: written(d / "junk.mp4", b"not a video" * 99), "'junk.mp4' could not be read as a video"),
    (lambda d: audio_only(d / "speech.wav"), "'speech.wav' has no video stream"),
])
def test_unusable_uploads_name_the_file_and_the_problem(tmp_path, make, message):
    with pytest.raises(UploadError, match=message) as err:
        check_video(make(tmp_path))
    assert str(tmp_path) not in str(err.value)  # the server's folders stay out of the page


def test_a_truncated_video_is_an_upload_error_or_readable(clip, tmp_path):
    data = clip.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 3])
    try:
        check_video(cut)  # FFmpeg may still open the head of a file: then decoding reports it per clip
    except UploadError as err:
        assert "'cut.mp4'" in str(err)


@pytest.mark.parametrize("settings, message", [
    (Settings(1.5, "interleaved", 8.0, None, 64), "between 0 and 1"),
    (Settings(0.5, "sideways", 8.0, None, 64), "window mode must be one of"),
    (Settings(0.5, "interleaved", -1.0, None, 64), "clip length must be positive"),
    (Settings(0.5, "interleaved", 8.0, 9.0, 64), "stride must be positive and at most the clip length"),
    (Settings(0.5, "interleaved", None, 2.0, 64), "stride must be positive and at most the clip length"),
    (Settings(0.5, "interleaved", 8.0, None, 0), "max new tokens must be at least 1"),
])
def test_bad_settings_are_explained(settings, message):
    with pytest.raises(ValueError, match=message):
        settings.checked()


def test_good_settings_pass():
    settings = Settings(0.0, "official", None, None, 1)
    assert settings.checked() is settings


class _FailingPredictor:
    defaults = Settings(0.5, "interleaved", 8.0, None, 64)

    def __init__(self, error: Exception):
        self.error, self.calls = error, 0

    def predict(self, *args, **kwargs):
        self.calls += 1
        raise self.error


def _run(app, video):
    return app.run(str(video) if video else None, 0.5, "interleaved", 8, 0, 64, progress=lambda *a, **k: None)


def test_the_page_gets_a_message_and_the_server_log_the_traceback(clip, tmp_path, caplog):
    from webdemo.app import DemoApp

    with Workspace(parent=tmp_path) as workspace:
        crashing = _FailingPredictor(RuntimeError("out of memory"))
        app = DemoApp(crashing, workspace)
        with caplog.at_level(logging.ERROR, logger="webdemo.app"):
            status, *_, state = _run(app, clip)
        assert "prediction failed (RuntimeError: out of memory)" in status and "Traceback" not in status
        assert state is None and "Traceback" in caplog.text  # the details stay on the server
        status, *_ = _run(app, tmp_path / "missing.mp4")  # checked before the model is asked
        assert "did not arrive" in status and crashing.calls == 1
        status, *_ = _run(DemoApp(_FailingPredictor(ValueError("the clip stride must be ...")), workspace), clip)
        assert "the clip stride must be ..." in status and 'role="alert"' in status


def test_workspace_keeps_the_latest_runs_and_is_removed_on_close(tmp_path):
    workspace = Workspace(keep_runs=2, parent=tmp_path)
    runs = [workspace.new_run() for _ in range(3)]
    assert not runs[0].exists() and runs[1].is_dir() and runs[2].is_dir()
    assert workspace.samples_dir.is_dir() and workspace.uploads_dir.is_dir()
    (runs[2] / "predictions_predict.json").write_text("{}")
    root = workspace.root
    workspace.close()
    assert not root.exists() and list(tmp_path.iterdir()) == []


def test_samples_are_eight_second_synthetic_clips(tmp_path):
    from formats.video_reader import PyAVVideoSource
    from webdemo.samples import write_samples

    samples = write_samples(tmp_path, count=2)
    assert [s.path.name for s in samples] == ["synthetic_1.mp4", "synthetic_2.mp4"]
    assert samples[0].caption != samples[1].caption and all(s.caption for s in samples)
    with PyAVVideoSource(samples[0].path) as video:
        assert (video.num_frames, video.fps, video.width, video.height) == (200, 25.0, 128, 128)


def test_the_command_line_passes_unknown_arguments_to_the_config_and_checks_files(tmp_path, capsys):
    from core.user_errors import run_command

    from webdemo.__main__ import main, parse_args

    args, overrides = parse_args(["--config", "a.yaml", "--config", "b.yaml", "--ckpt-path", "x.ckpt",
                                  "--model.init_args.max_new_tokens=8", "--judge", "j.ckpt"])
    assert args.config == ["a.yaml", "b.yaml"] and args.ckpt_path == "x.ckpt" and args.judge == "j.ckpt"
    assert args.host == "127.0.0.1" and args.port == 7860  # this machine only, by default
    assert overrides == ["--model.init_args.max_new_tokens=8"]
    with pytest.raises(SystemExit) as exit_info:
        run_command(main, ["--config", str(tmp_path / "missing.yaml"), "--ckpt-path", str(tmp_path / "x.ckpt")])
    assert exit_info.value.code == f"error: {tmp_path / 'missing.yaml'}: no such file (given as --config)"
