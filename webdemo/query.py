"""The page's query box: a phrase or a tagged sentence grounded on every clip of the predicted video.

The query goes through :func:`models.grove.query_grounding.ground_queries` (teacher-forced, as ``grove
ground``) with the demo's model, at the page's objectness threshold, one clip at a time, on the clips
the caption was predicted on. The answer is drawn on the clip's frame next to the caption's boxes, in a
colour of its own (the next colour after the caption's phrases), labelled ``asked: <query>``.
"""
from __future__ import annotations

from core.drawing import draw_boxes, phrase_colours

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from formats.records import GroundedRecord
from formats.unannotated_records import unannotated_record
from formats.video_files import probe_video
from formats.video_reader import PyAVVideoSource
from models.grove.processing import ground_queries, module_processor
from models.grove.query_grounding import parse_queries, referent_tube
from webdemo.results import DemoResult, frame_boxes, frame_masks

ASKED = "asked: "


@dataclass
class QueryAnswer:
    """A query's answer on every clip of a :class:`DemoResult`: clip key -> its entry (the predictions format
    plus ``query``, ``referent``, ``objectness``)."""

    query: str
    label: str
    clips: dict[str, dict]
    video_path: str = ""


def clip_record_of(result: DemoResult, index: int) -> GroundedRecord:
    clip = result.clips[index]
    info = probe_video(Path(result.video_path), Path(result.video_path).stem)
    return unannotated_record(info, clip.start_frame, clip.end_frame, clip_id=str(index))


def ground_on_result(predictor, result: DemoResult, text: str, threshold: float) -> QueryAnswer:
    """Ground ``text`` on every predicted clip of ``result`` with the demo's model (one request at a time)."""
    module = predictor.module
    model = module.model
    (query,) = parse_queries(model, [text])
    processor = module_processor(module, predictor.datamodule.hparams)
    processor.inference["objectness_threshold"] = float(threshold)
    answers = {}
    with predictor.lock, PyAVVideoSource(result.video_path) as video:
        for index, clip in enumerate(result.clips):
            if clip.prediction is None:
                continue
            record = clip_record_of(result, index)
            frames = video.read_frames(record.frame_indices.tolist())
            (entry,) = ground_queries(model, processor.sample(frames, record), [query],
                                      processor.inference["objectness_threshold"],
                                      processor.inference["objectness_strict"], processor.inference["window_mode"],
                                      processor.masker, frames if processor.masker is not None else None).values()
            answers[clip.key] = entry
    return QueryAnswer(query.text, ASKED + query.text, answers, str(result.video_path))


def answer_markdown(answer: QueryAnswer, result: DemoResult) -> str:
    """Where the answer is: per clip, the grid frames that keep it (or "absent")."""
    lines = [f"**{html.escape(answer.label)}** (referent: {html.escape(next(iter(answer.clips.values()))['referent'])})"
             if answer.clips else f"**{html.escape(answer.label)}**: no predicted clip to ground it on"]
    for clip in result.clips:
        entry = answer.clips.get(clip.key)
        if entry is None:
            continue
        kept = sorted(referent_tube(entry))
        where = (f"on {len(kept)} of {len(clip.grid)} frames, {kept[0] / result.fps:.1f}-{kept[-1] / result.fps:.1f} s"
                 if kept else "absent (objectness below the threshold on every frame)")
        lines.append(f"- {clip.key}: {where}")
    return "\n".join(lines)


def draw_with_answer(image: np.ndarray, prediction: Mapping[str, Any] | None, answer: QueryAnswer | None,
                     clip_key: str, frame: int) -> np.ndarray:
    """A source frame with the clip's caption boxes and the query's answer in its own colour."""
    boxes, labels, scores = frame_boxes(prediction, frame)
    masks = frame_masks(prediction, frame)
    phrases = list((prediction or {}).get("phrases", []))
    if answer is not None and clip_key in answer.clips:
        phrases.append(answer.label)
        item = referent_tube(answer.clips[clip_key]).get(int(frame))
        if item is not None:
            boxes = np.concatenate([boxes.reshape(-1, 4), np.asarray([item["box"]], dtype=np.float64)])
            labels, scores = [*labels, answer.label], [*scores, float(item["score"])]
            if masks is not None or item.get("mask"):
                from formats.mask_rle import decode_masks

                masks = [*(masks or [None] * (len(labels) - 1)),
                         decode_masks([item["mask"]])[0] if item.get("mask") else None]
    return draw_boxes(image[None], boxes, labels, phrase_colours(phrases), scores=scores or None, masks=masks)[0]


def ask_handlers(predictor):
    """The page's two handlers: ``ask(result, text, threshold, clip index, position)`` -> (answer markdown, the
    frame drawn with the answer, the answer state), and ``redraw(result, answer, clip index, position)`` -> the
    frame drawn with the answer (the slider moved)."""
    from models.grove.query_grounding import QueryError

    def error_markdown(message: str) -> str:  # the page's alert style (webdemo.app)
        return f'<div class="grove-error" role="alert">⚠️ {html.escape(message)}</div>'

    def frame_image(result, answer, index, position):
        if result is None or not result.clips:
            return None
        clip = result.clips[max(0, min(int(index or 0), len(result.clips) - 1))]
        frame = clip.grid[max(0, min(int(position or 0), len(clip.grid) - 1))]
        with PyAVVideoSource(result.video_path) as video:
            image = video.read_frames([frame])[0]
        return draw_with_answer(image, clip.prediction, answer, clip.key, frame)

    def ask(result, text, threshold, index, position):
        if result is None:
            return error_markdown("caption and ground a video first, then ask"), None, None
        try:
            answer = ground_on_result(predictor, result, text, threshold)
        except QueryError as err:
            return error_markdown(str(err)), frame_image(result, None, index, position), None
        return answer_markdown(answer, result), frame_image(result, answer, index, position), answer

    def redraw(result, answer, index, position):
        if answer is None or result is None or answer.video_path != str(result.video_path):
            return gr_skip()  # no answer, or one about a video predicted before
        return frame_image(result, answer, index, position)

    return ask, redraw


def gr_skip():
    """Leave the frame as the caption's handler drew it (no answer to add)."""
    import gradio as gr

    return gr.skip()


__all__ = ["ASKED", "QueryAnswer", "answer_markdown", "ask_handlers", "draw_with_answer", "ground_on_result"]
