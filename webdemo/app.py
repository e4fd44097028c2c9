"""The page: Gradio components and the handlers that fill them from a :class:`webdemo.results.DemoResult`."""
from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import Any, Sequence

import gradio as gr

from formats.video_reader import PyAVVideoSource, VideoDecodeError
from models.grove.windows import WINDOW_MODES
from webdemo.judging import ClipJudge
from webdemo.live_tab import build_live_tab
from webdemo.long_video import LongVideoResult, long_video_summary
from webdemo.plot import objectness_figure
from webdemo.predictor import DemoPredictor, ServerStopping, Settings
from webdemo.query import ask_handlers
from webdemo.results import DemoResult, caption_html, clip_label, draw_frame, summary_markdown
from webdemo.samples import Sample
from webdemo.timeline import entity_choices, segments_html, tube_html
from webdemo.upload import UploadError, check_video
from webdemo.workspace import Workspace

log = logging.getLogger(__name__)

# System fonts: the page loads nothing from outside the server.
THEME = gr.themes.Default(font=["system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"])
CSS = """
.grove-caption { font-size: 1.15em; line-height: 1.9; }
#grove-status.grove-error, #grove-status .grove-error { color: #b00020; }
/* small videos: the frame is drawn at its own size and shown enlarged, pixels kept sharp */
#grove-frame img { min-height: 320px; width: auto; object-fit: contain; image-rendering: pixelated; }
#grove-live-picture img { min-height: 320px; max-width: 100%; object-fit: contain; image-rendering: pixelated; }
.grove-live-legend { display: inline; margin-left: 1em; } .grove-live-legend li { display: inline; margin-right: 1em; }
.grove-live-story { max-height: 24em; overflow-y: auto; line-height: 1.9; }
"""


def error_markdown(message: str) -> str:
    """A message for the page (escaped: file names come from the person uploading)."""
    return f'<div class="grove-error" role="alert">⚠️ {html.escape(message)}</div>'


def clip_view(result: DemoResult | None, index: int) -> tuple[str, Any, dict, Any, str, str]:
    """Caption HTML, objectness plot, frame-slider update, first frame, frame label and judge text of a clip."""
    if result is None or not result.clips:
        return "", None, gr.update(minimum=0, maximum=1, value=0), None, "", ""
    clip = result.clips[max(0, min(int(index or 0), len(result.clips) - 1))]
    phrases = (clip.prediction or {}).get("phrases", [])
    figure = objectness_figure(clip.objectness, phrases, result.fps, result.threshold) if clip.prediction else None
    slider = gr.update(minimum=0, maximum=max(1, len(clip.grid) - 1), value=0, step=1)
    image, label = frame_view(result, index, 0)
    return caption_html(clip.prediction), figure, slider, image, label, judge_markdown(clip.judge)


def frame_view(result: DemoResult | None, index: int, position: int):
    """One grid frame of a clip at full size with its boxes and scores, and a line saying which frame it is."""
    if result is None or not result.clips:
        return None, ""
    clip = result.clips[max(0, min(int(index or 0), len(result.clips) - 1))]
    position = max(0, min(int(position or 0), len(clip.grid) - 1))
    frame = clip.grid[position]
    try:
        with PyAVVideoSource(result.video_path) as video:
            image = video.read_frames([frame])[0]
    except (VideoDecodeError, OSError) as err:
        return None, error_markdown(f"frame {frame} could not be decoded ({err})")
    kept = sum(1 for f in (clip.prediction or {}).get("frames", []) if int(f["frame"]) == frame)
    label = (f"frame {frame} ({frame / result.fps:.2f} s), grid position {position + 1} of {len(clip.grid)}"
             + ("" if kept else " · no box above the threshold"))
    return draw_frame(image, clip.prediction, frame), label


def entity_tube(video: dict | None, entity_id) -> str:
    """The chosen entity's tube on a long-video result (nothing before a result or a choice)."""
    return tube_html(video, entity_id) if video and entity_id is not None else ""


# What one press of the button fills, in this order; ``state`` (the per-clip result) stays last.
OUTPUTS = ("status", "annotated", "clips", "caption", "plot", "frame_slider", "frame_image", "frame_label", "judged",
           "json_file", "mp4_file", "clip_box", "timeline_box", "segments", "entities", "tube", "timeline_file",
           "timeline_state", "state")


def _outputs(**values) -> tuple:
    """Every output of :data:`OUTPUTS`, empty unless given."""
    hidden = gr.update(value=None, visible=False)
    empty = {"status": "", "annotated": None, "clips": gr.update(choices=[], value=None, visible=False),
             "caption": "", "plot": None, "frame_slider": gr.update(minimum=0, maximum=1, value=0),
             "frame_image": None, "frame_label": "", "judged": "", "json_file": hidden, "mp4_file": hidden,
             "clip_box": gr.update(visible=True), "timeline_box": gr.update(visible=False), "segments": "",
             "entities": gr.update(choices=[], value=None), "tube": "", "timeline_file": hidden,
             "timeline_state": None, "state": None}
    unknown = sorted(set(values) - set(OUTPUTS))
    if unknown:
        raise TypeError(f"not outputs of the page: {unknown}")
    return tuple(values.get(name, empty[name]) for name in OUTPUTS)


def judge_markdown(judge: dict | None) -> str:
    if not judge:
        return ""
    if judge.get("score") is None:
        reason = (judge.get("error") or "no score line in its answer").removeprefix("answer: ")
        return error_markdown(f"the judge gave no score: {reason}")
    return f"**VC-Inspector score: {judge['score']} / 5**\n\n{judge.get('explanation') or ''}"


class DemoApp:
    """Handlers of the page (plain functions of their inputs, so that tests call them directly)."""

    def __init__(self, predictor: DemoPredictor, workspace: Workspace, judge: ClipJudge | None = None):
        self.predictor, self.workspace, self.judge = predictor, workspace, judge

    def run(self, video, threshold, window_mode, clip_seconds, stride_seconds, max_new_tokens, long_video=False,
            progress=gr.Progress()):
        """Check the upload, predict (per clip, or in long-video mode), and fill every output; a problem
        becomes a message in the page."""
        mode = "long-video mode" if long_video else "prediction"
        try:
            check_video(video)
            settings = Settings(float(threshold), str(window_mode), float(clip_seconds) if clip_seconds else None,
                                float(stride_seconds) if stride_seconds else None, int(max_new_tokens))
            if long_video:
                return self._run_long(video, settings, progress)
            progress((0, 1), desc="decoding and predicting", unit="clips")

            def report(done: int, total: int, what: str) -> None:
                progress((done, max(total, 1)), desc=what, unit="clips")

            result = self.predictor.predict(video, settings, self.workspace.new_run(), progress=report,
                                            video_name=Path(video).name)
            if self.judge is not None:
                self._judge(result, progress)
        except (UploadError, ValueError, ServerStopping) as err:
            return self._failed(str(err))
        except Exception as err:  # noqa: BLE001  (the page gets a sentence, the server log the traceback)
            log.exception("%s failed on %s", mode, video)
            return self._failed(f"{mode} failed ({type(err).__name__}: {err}); the server log has the details")
        choices = [(clip_label(i, c, result.fps), i) for i, c in enumerate(result.clips)]
        caption, figure, slider, image, label, judged = clip_view(result, 0)
        mp4 = str(result.annotated_path) if result.annotated_path else None
        return _outputs(status=summary_markdown(result), annotated=mp4,
                        clips=gr.update(choices=choices, value=0, visible=len(choices) > 1), caption=caption,
                        plot=figure, frame_slider=slider, frame_image=image, frame_label=label, judged=judged,
                        json_file=gr.update(value=str(result.predictions_path), visible=True),
                        mp4_file=gr.update(value=mp4, visible=mp4 is not None), state=result)

    def _run_long(self, video, settings: Settings, progress):
        """Long-video mode: the timeline (segments, entities, a tube on choosing one) and the entity-coloured MP4."""
        progress((0, 1), desc="streaming the video through the model", unit="s")

        def report(done: int, total: int, what: str) -> None:
            progress((done, max(total, 1)), desc=what, unit="s")

        result: LongVideoResult = self.predictor.predict_long(video, settings, self.workspace.new_run(),
                                                              progress=report, video_name=Path(video).name)
        if self.judge is not None:
            result.notes.append("the judge rates clips in the per-clip mode only")
        timeline = result.timeline
        mp4 = str(result.annotated_path) if result.annotated_path else None
        return _outputs(status=long_video_summary(result), annotated=mp4, clip_box=gr.update(visible=False),
                        timeline_box=gr.update(visible=True), segments=segments_html(timeline),
                        entities=gr.update(choices=entity_choices(timeline), value=None),
                        json_file=gr.update(value=str(result.predictions_path), visible=True),
                        mp4_file=gr.update(value=mp4, visible=mp4 is not None),
                        timeline_file=gr.update(value=str(result.timeline_path), visible=True),
                        timeline_state=timeline)

    def _judge(self, result: DemoResult, progress) -> None:
        """Each predicted clip's caption rated by the judge; a failure is shown, the prediction kept."""
        todo = [c for c in result.clips if c.prediction and c.prediction.get("caption", "").strip()]
        if not todo:
            return
        progress((0, len(todo)), desc="judging the captions", unit="clips")
        rows = [{"key": c.key, "video": str(Path(result.video_path).resolve()), "caption": c.prediction["caption"],
                 "start_frame": c.start_frame, "end_frame": c.end_frame} for c in todo]
        try:
            answers = self.judge(rows)
        except Exception as err:  # noqa: BLE001  (a judge failure must not lose the prediction)
            log.exception("the judge failed on %s", result.video_name)
            answers = [{"error": f"{type(err).__name__}: {err}"}] * len(todo)
        for clip, answer in zip(todo, answers):
            clip.judge = answer

    @staticmethod
    def _failed(message: str):
        return _outputs(status=error_markdown(message))


def build_app(predictor: DemoPredictor, workspace: Workspace, samples: Sequence[Sample] = (),
              judge: ClipJudge | None = None, title: str = "GROVE: grounded video captions") -> gr.Blocks:
    handlers = DemoApp(predictor, workspace, judge)
    defaults = predictor.defaults
    with gr.Blocks(title=title, delete_cache=(3600, 3600)) as demo:
        gr.Markdown(f"# {title}\nUpload a video (any size, frame rate and length) or pick a synthetic sample, "
                    "then **Caption and ground**. Each phrase of the caption gets its own colour, boxes and "
                    "objectness curve; in long-video mode the phrases of all clips are linked into entities, "
                    "one colour each, on a timeline. The **Live** tab captions your camera or a stream as it "
                    "happens, with entity ids kept from clip to clip.")
        state = gr.State(None)
        timeline_state = gr.State(None)
        with gr.Tabs(elem_id="grove-tabs"):
            with gr.Tab("Video", id="video", elem_id="grove-video-tab"):
                with gr.Row():
                    with gr.Column(scale=1):
                        video_in = gr.Video(label="video", sources=["upload"], format=None, include_audio=True,
                                            elem_id="grove-upload")
                        if samples:
                            gr.Examples(examples=[[str(s.path)] for s in samples], inputs=[video_in],
                                        example_labels=[f"synthetic: {s.caption}" for s in samples],
                                        label="synthetic samples")
                        long_video = gr.Checkbox(
                            value=False, label="long-video mode (configs/overlays/long_video.yaml: one streaming pass, "
                                               "a timeline of entities linked across clips)",
                            info=None if predictor.long_video is not None else
                            f"not available: {predictor.long_video_error[:300]}",
                            interactive=predictor.long_video is not None, elem_id="grove-long")
                        with gr.Accordion("settings", open=False):
                            threshold = gr.Slider(0.0, 1.0, value=defaults.objectness_threshold, step=0.01,
                                                  label="objectness threshold (a box is kept where its phrase's "
                                                        "objectness reaches it)")
                            window_mode = gr.Dropdown(list(WINDOW_MODES), value=defaults.window_mode,
                                                      label="window mode")
                            clip_seconds = gr.Number(value=defaults.clip_seconds or 0, minimum=0,
                                                     label="clip length in seconds (0: the whole video as one clip)")
                            stride_seconds = gr.Number(value=defaults.stride_seconds or 0, minimum=0,
                                                       label="clip stride in seconds (0: clips follow each other; "
                                                             "long-video mode needs 0)")
                            max_new_tokens = gr.Slider(1, 256, value=defaults.max_new_tokens, step=1,
                                                       label="max new tokens of the caption")
                        run = gr.Button("Caption and ground", variant="primary", elem_id="grove-run")
                        status = gr.Markdown(elem_id="grove-status")
                        with gr.Row():
                            json_file = gr.DownloadButton("predictions (JSON)", visible=False, elem_id="grove-json")
                            mp4_file = gr.DownloadButton("annotated video (MP4)", visible=False, elem_id="grove-mp4")
                            timeline_file = gr.DownloadButton("timeline (JSON)", visible=False,
                                                              elem_id="grove-timeline-json")
                    with gr.Column(scale=2):
                        annotated = gr.Video(label="annotated video", interactive=False, elem_id="grove-annotated")
                        with gr.Column(visible=False, elem_id="grove-timeline") as timeline_box:
                            segments = gr.HTML(elem_id="grove-segments")
                            entities = gr.Radio(choices=[], label="entities (choose one to see its tube)",
                                                elem_id="grove-entities")
                            tube = gr.HTML(elem_id="grove-tube")
                        with gr.Column(elem_id="grove-clip-view") as clip_box:
                            clips = gr.Dropdown(choices=[], label="clips of the video", visible=False,
                                                elem_id="grove-clips")
                            caption = gr.HTML(elem_id="grove-caption")
                            judged = gr.Markdown(elem_id="grove-judge", visible=judge is not None)
                            frame_slider = gr.Slider(0, 1, value=0, step=1, label="frame of the clip (5-fps grid)",
                                                     elem_id="grove-frame-slider")
                            frame_label = gr.Markdown(elem_id="grove-frame-label")
                            frame_image = gr.Image(label="frame at full size", interactive=False, format="png",
                                                   elem_id="grove-frame")
                            plot = gr.Plot(label="objectness over time", elem_id="grove-plot")
                            with gr.Row():
                                query_in = gr.Textbox(
                                    label="ask: a phrase, or a sentence with its phrases in <p>...</p>",
                                    elem_id="grove-query", scale=4)
                                ask = gr.Button("Ground the query", elem_id="grove-ask", scale=1)
                            query_answer = gr.Markdown(elem_id="grove-query-answer")
                            query_state = gr.State(None)
            with gr.Tab("Live", id="live", elem_id="grove-live-tab"):
                build_live_tab(predictor, workspace, demo)
        components = {"status": status, "annotated": annotated, "clips": clips, "caption": caption, "plot": plot,
                      "frame_slider": frame_slider, "frame_image": frame_image, "frame_label": frame_label,
                      "judged": judged, "json_file": json_file, "mp4_file": mp4_file, "clip_box": clip_box,
                      "timeline_box": timeline_box, "segments": segments, "entities": entities, "tube": tube,
                      "timeline_file": timeline_file, "timeline_state": timeline_state, "state": state}
        run.click(handlers.run, inputs=[video_in, threshold, window_mode, clip_seconds, stride_seconds, max_new_tokens,
                                        long_video],
                  outputs=[components[name] for name in OUTPUTS], concurrency_limit=1, concurrency_id="predict")
        clips.input(clip_view, inputs=[state, clips],
                    outputs=[caption, plot, frame_slider, frame_image, frame_label, judged])
        slid = frame_slider.input(frame_view, inputs=[state, clips, frame_slider], outputs=[frame_image, frame_label],
                                  trigger_mode="always_last")
        entities.change(entity_tube, inputs=[timeline_state, entities], outputs=[tube])
        ask_query, redraw = ask_handlers(predictor)
        ask.click(ask_query, inputs=[state, query_in, threshold, clips, frame_slider],
                  outputs=[query_answer, frame_image, query_state], concurrency_limit=1, concurrency_id="predict")
        slid.then(redraw, inputs=[state, query_state, clips, frame_slider], outputs=[frame_image])  # answer on top
    return demo
