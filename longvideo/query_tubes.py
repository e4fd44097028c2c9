"""A query's tube across a whole video: the video cut into clips as ``cli.py predict`` cuts it, each query
grounded on every clip (:mod:`models.grove.query_grounding`), the clips' answers joined into one tube.

The query itself links the clips: every clip is asked the same text, so its answers are one object's
by construction, with no appearance matching. Where clips overlap (a stride shorter than the clip) a
grid frame takes the answer of the clip whose centre is nearest, as the annotated video draws it
(:func:`callbacks.annotated_video.grid_owners`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from callbacks.annotated_video import ClipPrediction, grid_owners
from datamodules.video_folder import clip_records
from formats.video_files import open_video, probe_video
from models.grove.processing import ground_queries
from models.grove.query_grounding import parse_queries, query_key


def ground_video_queries(model, processor, video_path: str | Path, queries: Sequence[str],
                         clip_seconds: float | None = 8.0, stride_seconds: float | None = None,
                         progress: Callable[[int, int], None] | None = None) -> dict[str, dict[str, Any]]:
    """Per query (keyed ``{video}#query{i}``) its tube over the whole video: the predictions-format entry
    (``frames`` over all clips), plus ``query``, ``referent``, ``objectness`` (every grid frame) and
    ``clips`` (each clip's first and last source frame)."""
    checked = parse_queries(model, queries)
    path = Path(video_path).resolve()
    info = probe_video(path, path.stem)
    records = clip_records(info, clip_seconds, stride_seconds)
    inference = processor.inference
    answers: list[dict[str, dict]] = []
    with open_video(Path("/"), str(path)) as video:
        for n, record in enumerate(records, 1):
            frames = video.read_frames(record.frame_indices.tolist())
            answers.append(ground_queries(model, processor.sample(frames, record), checked,
                                          inference["objectness_threshold"], inference["objectness_strict"],
                                          inference["window_mode"], processor.masker,
                                          frames if processor.masker is not None else None))
            if progress is not None:
                progress(n, len(records))
    grid, owner = grid_owners([ClipPrediction(r, None) for r in records])
    owned = dict(zip(grid.tolist(), owner.tolist()))
    out = {}
    for i, query in enumerate(checked):
        per_clip = [answers[c][query_key(r.key, i)] for c, r in enumerate(records)]
        frames = [f for c, entry in enumerate(per_clip) for f in entry["frames"] if owned[int(f["frame"])] == c]
        scores = {}
        for c, entry in enumerate(per_clip):
            for frame, row in zip(entry["objectness"]["frames"], entry["objectness"]["scores"]):
                if owned[int(frame)] == c:
                    scores[int(frame)] = row
        first = per_clip[0]
        out[f"{info.video_id}#query{i}"] = {
            "caption": first["caption"], "tagged_caption": first["tagged_caption"], "phrases": first["phrases"],
            "frames": sorted(frames, key=lambda f: f["frame"]), "query": query.text, "referent": first["referent"],
            "objectness": {"frames": sorted(scores), "scores": [scores[f] for f in sorted(scores)]},
            "clips": [[int(r.clip_start_frame), int(r.clip_end_frame)] for r in records]}
    return out


__all__ = ["ground_video_queries"]
