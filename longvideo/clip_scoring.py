"""The project's per-clip metrics of a long-video predict run on a long synthetic video: its
``predictions_predict.json`` against the clip records of the video's ground truth
(:mod:`longvideo.clip_records`), by the offline evaluator (:mod:`metrics.evaluator.evaluation`, project
protocol). The identity measures (:mod:`longvideo.scoring`) say whether entities keep their ids
across clips; these say how well each clip is captioned and grounded.

Before scoring, every segment of the run's timeline must be a clip of the records with the same
first and last frame, so a run cut differently (``segmenter: shots``, another clip length) is
refused with the clip that differs instead of being scored against the wrong boxes. Clips of the
video the run did not predict (a decoding gap) count as empty predictions, as the evaluator
counts any missing clip; predictions of other videos in the same file are left out.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from formats.predictions import iter_prediction_file
from formats.records import GroundedRecord
from longvideo.clip_records import records_from_truth
from longvideo.scoring import check_truth_matches_video
from metrics.evaluator.evaluation import evaluate_prediction_stream

CAPTION_METRICS = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr")


def check_segments(timeline: Mapping[str, Any], records: Mapping[str, GroundedRecord], source: str) -> None:
    """Refuse a run whose clips are not the records' clips (``source``: the timeline's file)."""
    if timeline.get("segmenter", "grid") != "grid":
        raise ValueError(f"{source}: video {timeline.get('video_id')!r} was cut with segmenter "
                         f"{timeline.get('segmenter')!r}; the per-clip records follow the grid segmentation "
                         "(segmenter: grid)")
    for segment in timeline["segments"]:
        record = records.get(segment["key"])
        if record is None:
            raise ValueError(f"{source}: segment {segment['key']!r} is not a clip of the ground truth "
                             f"({len(records)} clips); was the run's data.video_clip_seconds another "
                             "--clip-seconds?")
        got = (int(segment["start_frame"]), int(segment["end_frame"]))
        want = (record.clip_start_frame, record.clip_end_frame)
        if got != want:
            raise ValueError(f"{source}: segment {segment['key']!r} covers frames {got[0]}..{got[1]} but the "
                             f"ground truth's clip covers {want[0]}..{want[1]}; was the run's "
                             "data.video_clip_seconds another --clip-seconds?")


def score_run_clips(truth: Mapping[str, Any], timeline: Mapping[str, Any], predictions: str | Path,
                    clip_seconds: float = 8.0, text_encoder: Any = "minilm",
                    caption_metrics: Sequence[str] = CAPTION_METRICS, capture: bool = True,
                    timeline_source: str = "<timeline>") -> dict[str, Any]:
    """The evaluator's report (:func:`metrics.evaluator.evaluation.evaluate_prediction_stream`) of one video
    of a run: ``timeline`` is its entry in ``timeline.json``, ``predictions`` the run's file."""
    check_truth_matches_video(truth, timeline, "the ground truth", timeline_source)
    records = {r.key: r for r in records_from_truth(truth, clip_seconds, video_id=str(timeline["video_id"]))}
    check_segments(timeline, records, timeline_source)

    def this_video() -> Iterator[tuple[str, Any]]:
        for key, prediction in iter_prediction_file(predictions):
            if key in records:
                yield key, prediction

    return evaluate_prediction_stream(records, this_video(), level="both", text_encoder=text_encoder,
                                      caption_metrics=tuple(caption_metrics), capture=capture,
                                      pred_source=str(predictions))
