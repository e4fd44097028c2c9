"""The page: Gradio components and the handlers that fill them from a :class:`webdemo.results.DemoResult`."""
from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import Any, Sequence

import gradio as gr

from formats.video import PyAVVideoSource, VideoDecodeError
from models.inference import WINDOW_MODES
from webdemo.judging import ClipJudge
from webdemo.plot import objectness_figure
from webdemo.predictor import DemoPredictor, Settings
from webdemo.results import DemoResult, caption_html, clip_label, draw_frame, summary_markdown
from webdemo.samples import Sample
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

    def run(self, video, threshold, window_mode, clip_seconds, stride_seconds, max_new_tokens,
            progress=gr.Progress()):
        """Check the upload, predict, and fill every output; a problem becomes a message in the page."""
        try:
            check_video(video)
            settings = Settings(float(threshold), str(window_mode), float(clip_seconds) if clip_seconds else None,
                                float(stride_seconds) if stride_seconds else None, int(max_new_tokens))
            progress((0, 1), desc="decoding and predicting", unit="clips")

            def report(done: int, total: int, what: str) -> None:
                progress((done, max(total, 1)), desc=what, unit="clips")

            result = self.predictor.predict(video, settings, self.workspace.new_run(), progress=report,
                                            video_name=Path(video).name)
            if self.judge is not None:
                self._judge(result, progress)
        except (UploadError, ValueError) as err:
            return self._failed(str(err))
        except Exception as err:  # noqa: BLE001  (the page gets a sentence, the server log the traceback)
            log.exception("prediction failed on %s", video)
            return self._failed(f"prediction failed ({type(err).__name__}: {err}); the server log has the details")
        choices = [(clip_label(i, c, result.fps), i) for i, c in enumerate(result.clips)]
        caption, figure, slider, image, label, judged = clip_view(result, 0)
        return (summary_markdown(result), str(result.annotated_path) if result.annotated_path else None,
                gr.update(choices=choices, value=0, visible=len(choices) > 1), caption, figure, slider, image, label,
                judged, gr.update(value=str(result.predictions_path), visible=True),
                gr.update(value=str(result.annotated_path) if result.annotated_path else None,
                          visible=result.annotated_path is not None), result)

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
        hidden = gr.update(value=None, visible=False)
        return (error_markdown(message), None, gr.update(choices=[], value=None, visible=False), "", None,
                gr.update(minimum=0, maximum=1, value=0), None, "", "", hidden, hidden, None)


def build_app(predictor: DemoPredictor, workspace: Workspace, samples: Sequence[Sample] = (),
              judge: ClipJudge | None = None, title: str = "GROVE: grounded video captions") -> gr.Blocks:
    handlers = DemoApp(predictor, workspace, judge)
    defaults = predictor.defaults
    with gr.Blocks(title=title, delete_cache=(3600, 3600)) as demo:
        gr.Markdown(f"# {title}\nUpload a video (any size, frame rate and length) or pick a synthetic sample, "
                    "then **Caption and ground**. Each phrase of the caption gets its own colour, boxes and "
                    "objectness curve.")
        state = gr.State(None)
        with gr.Row():
            with gr.Column(scale=1):
                video_in = gr.Video(label="video", sources=["upload"], format=None, include_audio=True,
                                    elem_id="grove-upload")
                if samples:
                    gr.Examples(examples=[[str(s.path)] for s in samples], inputs=[video_in],
                                example_labels=[f"synthetic: {s.caption}" for s in samples],
                                label="synthetic samples")
                with gr.Accordion("settings", open=False):
                    threshold = gr.Slider(0.0, 1.0, value=defaults.objectness_threshold, step=0.01,
                                          label="objectness threshold (a box is kept where its phrase's "
                                                "objectness reaches it)")
                    window_mode = gr.Dropdown(list(WINDOW_MODES), value=defaults.window_mode, label="window mode")
                    clip_seconds = gr.Number(value=defaults.clip_seconds or 0, minimum=0,
                                             label="clip length in seconds (0: the whole video as one clip)")
                    stride_seconds = gr.Number(value=defaults.stride_seconds or 0, minimum=0,
                                               label="clip stride in seconds (0: clips follow each other)")
                    max_new_tokens = gr.Slider(1, 256, value=defaults.max_new_tokens, step=1,
                                               label="max new tokens of the caption")
                run = gr.Button("Caption and ground", variant="primary", elem_id="grove-run")
                status = gr.Markdown(elem_id="grove-status")
                with gr.Row():
                    json_file = gr.DownloadButton("predictions (JSON)", visible=False, elem_id="grove-json")
                    mp4_file = gr.DownloadButton("annotated video (MP4)", visible=False, elem_id="grove-mp4")
            with gr.Column(scale=2):
                annotated = gr.Video(label="annotated video", interactive=False, elem_id="grove-annotated")
                clips = gr.Dropdown(choices=[], label="clips of the video", visible=False, elem_id="grove-clips")
                caption = gr.HTML(elem_id="grove-caption")
                judged = gr.Markdown(elem_id="grove-judge", visible=judge is not None)
                frame_slider = gr.Slider(0, 1, value=0, step=1, label="frame of the clip (5-fps grid)",
                                         elem_id="grove-frame-slider")
                frame_label = gr.Markdown(elem_id="grove-frame-label")
                frame_image = gr.Image(label="frame at full size", interactive=False, format="png",
                                       elem_id="grove-frame")
                plot = gr.Plot(label="objectness over time", elem_id="grove-plot")
        run.click(handlers.run, inputs=[video_in, threshold, window_mode, clip_seconds, stride_seconds, max_new_tokens],
                  outputs=[status, annotated, clips, caption, plot, frame_slider, frame_image, frame_label, judged,
                           json_file, mp4_file, state],
                  concurrency_limit=1, concurrency_id="predict")
        clips.input(clip_view, inputs=[state, clips],
                    outputs=[caption, plot, frame_slider, frame_image, frame_label, judged])
        frame_slider.input(frame_view, inputs=[state, clips, frame_slider], outputs=[frame_image, frame_label],
                           trigger_mode="always_last")
    return demo
