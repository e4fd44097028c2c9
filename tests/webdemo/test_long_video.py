"""Long-video mode from the upload page: the overlay file is what sets it up, the run writes what
``cli.py predict`` with the overlay writes, and the page's handler shows the timeline or a message."""
import html
import json
import logging

import pytest
import yaml

from longvideo.datamodule import LongVideoDataModule
from longvideo.timeline import read_timeline
from models.grove import Grove
from tests.fixtures.paths import ROOT
from tests.webdemo.fixed_caption_server import fixed_generate_captions
from tests.webdemo.test_timeline_browser import timeline as kitchen_timeline
from tests.webdemo.tiny_model import DEMO_CONFIG, TINY_MODEL_ARGS, predict_with_cli
from tests.webdemo.walking_square import walking_square
from webdemo.long_video import LONG_VIDEO_OVERLAY, LongVideoResult, LongVideoSetup, overlay_callback_paths
from webdemo.predictor import DemoPredictor, Settings, _ParseOnly
from webdemo.workspace import Workspace

TIMELINE = "longvideo.timeline_writer.LongVideoTimeline"


def parse(*configs, extra=()):
    """The predict section of ``--config demo.yaml --config ...`` (parsed as the page parses it, nothing built)."""
    args = ["predict", "--config", str(DEMO_CONFIG)]
    for config in configs:
        args += ["--config", str(config)]
    return _ParseOnly(subclass_mode_model=True, subclass_mode_data=True, save_config_callback=None,
                      parser_kwargs={"parser_mode": "omegaconf"},
                      args=[*args, f"--data.init_args.videos={DEMO_CONFIG}", *TINY_MODEL_ARGS, *extra], run=True).parsed


def test_the_setup_is_the_overlay_file_s():
    assert LONG_VIDEO_OVERLAY == ROOT / "configs" / "overlays" / "long_video.yaml"
    overlay = yaml.safe_load(LONG_VIDEO_OVERLAY.read_text())
    written_callbacks = overlay["trainer"]["callbacks+"]
    assert overlay_callback_paths(LONG_VIDEO_OVERLAY) == [c["class_path"] for c in written_callbacks]
    assert TIMELINE in overlay_callback_paths(LONG_VIDEO_OVERLAY)
    setup = LongVideoSetup.from_parsed(parse(LONG_VIDEO_OVERLAY), LONG_VIDEO_OVERLAY)
    assert setup.data_class is LongVideoDataModule
    for key, value in overlay["data"]["init_args"].items():
        assert setup.data_args[key] == value
    assert setup.data_args["num_frames"] == 8  # the demo config's, kept under the overlay
    assert [spec["class_path"] for spec in setup.callbacks] == [c["class_path"] for c in written_callbacks]
    for spec, written in zip(setup.callbacks, written_callbacks):
        assert {k: spec["init_args"][k] for k in written["init_args"]} == written["init_args"]


def test_another_overlay_file_changes_the_setup_and_a_bad_one_is_named(tmp_path):
    overlay = yaml.safe_load(LONG_VIDEO_OVERLAY.read_text())
    overlay["data"]["init_args"]["segmenter"] = "shots"
    (written,) = [c for c in overlay["trainer"]["callbacks+"] if c["class_path"] == TIMELINE]
    written["init_args"].update(text_encoder="exact", render=False)
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(overlay))
    setup = LongVideoSetup.from_parsed(parse(changed), changed)
    assert setup.data_args["segmenter"] == "shots"
    (callback,) = [c for c in setup.make_callbacks(tmp_path / "run") if type(c).__name__ == "LongVideoTimeline"]
    assert (callback.text_encoder, callback.render, callback.output_dir) == ("exact", False, str(tmp_path / "run"))

    no_data = tmp_path / "no_data.yaml"
    no_data.write_text(yaml.safe_dump({"trainer": overlay["trainer"]}))
    with pytest.raises(ValueError, match=r"no_data.yaml: data.class_path is missing"):
        overlay_callback_paths(no_data)
    no_timeline = tmp_path / "no_timeline.yaml"
    no_timeline.write_text(yaml.safe_dump({"data": overlay["data"]}))
    with pytest.raises(ValueError, match=r"no_timeline.yaml: .*no longvideo.timeline_writer.LongVideoTimeline"):
        LongVideoSetup.from_parsed(parse(no_timeline), no_timeline)


@pytest.fixture(scope="module")
def predictor(tiny_checkpoint, tiny_synthetic_root):
    clip = sorted((tiny_synthetic_root / "videos").glob("synthtest*.mp4"))[0]
    return DemoPredictor([DEMO_CONFIG], tiny_checkpoint, clip, TINY_MODEL_ARGS)


@pytest.mark.slow
def test_the_long_video_run_writes_the_command_line_s_files(predictor, tiny_checkpoint, tmp_path, monkeypatch):
    monkeypatch.setattr(Grove, "generate_captions", fixed_generate_captions)  # two phrases to link
    video = walking_square(tmp_path / "walk.mp4")
    progress = []
    with Workspace(parent=tmp_path) as workspace:
        run = workspace.new_run()
        result = predictor.predict_long(video, Settings(0.0, "interleaved", 8.0, None, 6), run,
                                        progress=lambda *a: progress.append(a))
        assert result.timeline_path == run / "timeline.json" and result.predictions_path.parent == run
        document = read_timeline(result.timeline_path)  # checked against the schema
        predictions = json.loads(result.predictions_path.read_text())
        page_files = result.timeline_path.read_text(), result.predictions_path.read_text()
        assert result.annotated_path == run / "annotated" / "walk.mp4" and result.annotated_path.stat().st_size > 0
    (timeline,) = document["videos"]
    assert result.timeline == timeline
    assert [s["key"] for s in timeline["segments"]] == list(predictions) == ["walk_0", "walk_1", "walk_2"]
    assert [(s["start_s"], s["end_s"]) for s in timeline["segments"]] == [(0.0, 8.0), (8.0, 16.0), (12.0, 20.0)]
    assert sorted(e["name"] for e in timeline["entities"]) == ["red shape", "the wall"]
    assert progress[-1] == (20, 20, "linking the entities and drawing the timeline video")
    assert predictor.module.report_objectness is False

    # the same files as the command line with the overlay stacked (same batch size as the server's config)
    expected = predict_with_cli(tiny_checkpoint, video, tmp_path / "cli", "--config", str(LONG_VIDEO_OVERLAY),
                                "--data.init_args.eval_batch_size=8", "--model.init_args.objectness_threshold=0.0")
    cli_run = next((tmp_path / "cli").rglob("timeline.json")).parent
    assert page_files[1] == json.dumps(expected)
    assert page_files[0] == (cli_run / "timeline.json").read_text()  # byte for byte


def test_a_stride_or_an_unreadable_overlay_is_a_message(predictor, tmp_path):
    with pytest.raises(ValueError, match="set the clip stride to 0"):
        predictor.predict_long(tmp_path / "walk.mp4", Settings(0.5, "interleaved", 8.0, 4.0, 6), tmp_path)


class _LongPredictor:
    defaults = Settings(0.5, "interleaved", 8.0, None, 64)
    long_video, long_video_error = object(), ""

    def __init__(self, result=None, error=None):
        self.result, self.error, self.calls = result, error, []

    def predict(self, *args, **kwargs):
        raise AssertionError("the per-clip path was taken in long-video mode")

    def predict_long(self, video, settings, out_dir, progress=None, video_name=None):
        self.calls.append((video, settings, out_dir))
        if self.error is not None:
            raise self.error
        return self.result


def _run_long(app, video):
    from webdemo.app import OUTPUTS

    values = app.run(str(video), 0.5, "interleaved", 8, 0, 64, True, progress=lambda *a, **k: None)
    return dict(zip(OUTPUTS, values))


def test_the_page_shows_the_timeline_or_a_message(tmp_path, caplog):
    from webdemo.app import DemoApp, entity_tube
    from webdemo.timeline import entity_choices, segments_html, tube_html

    video = walking_square(tmp_path / "walk.mp4", seconds=1.0)
    kitchen = kitchen_timeline()
    result = LongVideoResult("walk.mp4", kitchen, tmp_path / "timeline.json", tmp_path / "predictions_predict.json",
                             tmp_path / "annotated" / "kitchen.mp4", seconds=1.5)
    with Workspace(parent=tmp_path) as workspace:
        shown = _run_long(DemoApp(_LongPredictor(result), workspace), video)
        assert "**walk.mp4** (long-video mode)" in shown["status"] and "3 segment(s), 3 entities, 1 gap(s)" \
            in shown["status"] and "not decoded 16.00-19.70 s: InvalidDataError: x" in shown["status"]
        assert shown["segments"] == segments_html(kitchen)
        assert shown["entities"]["choices"] == entity_choices(kitchen)
        assert shown["timeline_file"] == {"__type__": "update", "value": str(tmp_path / "timeline.json"),
                                          "visible": True}
        assert shown["annotated"] == str(tmp_path / "annotated" / "kitchen.mp4")
        assert shown["timeline_box"]["visible"] and not shown["clip_box"]["visible"]
        assert shown["timeline_state"] is kitchen and shown["state"] is None
        assert entity_tube(kitchen, 2) == tube_html(kitchen, 2) and entity_tube(None, 2) == ""

        failing = _LongPredictor(error=RuntimeError("the stream broke"))
        with caplog.at_level(logging.ERROR, logger="webdemo.app"):
            shown = _run_long(DemoApp(failing, workspace), video)
        assert "long-video mode failed (RuntimeError: the stream broke)" in shown["status"]
        assert 'role="alert"' in shown["status"] and "Traceback" not in shown["status"]
        assert "Traceback" in caplog.text and not shown["timeline_box"]["visible"]
        off = _LongPredictor(error=ValueError("long-video mode is not available on this server: x.yaml ..."))
        assert "not available on this server" in _run_long(DemoApp(off, workspace), video)["status"]
        broken = tmp_path / "broken.mp4"
        broken.write_bytes(b"not a video" * 99)
        unread = _LongPredictor(result)
        message = html.unescape(_run_long(DemoApp(unread, workspace), broken)["status"])
        assert "'broken.mp4' could not be read as a video" in message
        assert unread.calls == []  # checked before the model is asked


@pytest.mark.slow
def test_an_overlay_that_does_not_stack_leaves_the_per_clip_page_serving(tiny_checkpoint, tiny_synthetic_root):
    clip = sorted((tiny_synthetic_root / "videos").glob("synthtest*.mp4"))[0]
    predictor = DemoPredictor([DEMO_CONFIG], tiny_checkpoint, clip, [*TINY_MODEL_ARGS, "--data.init_args.root=/x"])
    assert predictor.long_video is None  # LongVideoDataModule takes no root, as on the command line
    assert str(LONG_VIDEO_OVERLAY) in predictor.long_video_error and "'root' is not accepted" \
        in predictor.long_video_error
    with pytest.raises(ValueError, match="long-video mode is not available on this server: .*long_video.yaml"):
        predictor.predict_long(clip, predictor.defaults, clip.parent)
    assert predictor.defaults.max_new_tokens == 6  # the per-clip predictor was built
