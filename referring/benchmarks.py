"""MeViS and Ref-YouTube-VOS from their files as distributed: every expression grounded by GROVE and written
in the benchmark's submission layout.

Both ship ``meta_expressions.json`` as ``{"videos": {video: {"frames": [frame names], "expressions":
{exp_id: {"exp": text, ...}}}}}`` and the frames as ``JPEGImages/<video>/<frame>.jpg`` (MeViS, Ding et
al., ICCV 2023: ``valid_u`` and ``valid`` split folders; Ref-YouTube-VOS, Seo et al., "URVOS", ECCV 2020:
``meta_expressions/<split>/meta_expressions.json`` beside ``<split>/JPEGImages``). The expressions'
object ids and masks (MeViS's ``anno_id``/``mask_dict.json``, Ref-YouTube-VOS's ``obj_id`` and
``Annotations/``) are not needed to predict.

Each video is one clip whose grid is every listed frame. Each expression is asked as one phrase (the
whole sentence names the referent), teacher-forced, exactly as ``grove ground`` asks a query
(:mod:`models.grove.query_grounding`); a video's expressions share one decode of its frames. The mask of
a frame is the referent's mask from the masker (``configs/masks.yaml``), or, without one, its box
filled; a frame where the objectness rejects the referent is empty. Written:

* ``<out>/<video>/<exp_id>/<frame>.png`` (MeViS) or ``<out>/Annotations/<video>/<exp_id>/<frame>.png``
  (Ref-YouTube-VOS), 0 background and 255 object, one per listed frame;
* ``<out>/predictions.json``: one clip per expression keyed ``{video}_{exp_id}``, frames numbered by
  their position in the video's list, each with its referent's box and mask (what ``metrics.mevis`` reads);
* ``<out>/refused.json``: the expressions the model cannot ground as written (the reason; their PNGs
  are empty), so a score never hides them.
"""
from __future__ import annotations

from core.user_errors import UserInputError

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

import numpy as np

from formats.mask_rle import decode_masks, encode_masks
from formats.records import GroundedRecord
from formats.unannotated_records import unannotated_record
from formats.video_files import VideoInfo
from models.grove.processing import ground_queries
from models.grove.query_grounding import QueryError, parse_queries, query_key, referent_tube

BENCHMARKS = ("mevis", "ref-youtube-vos")
# Every listed frame is a grid frame: a record at 5 fps steps one frame at a time (formats.frame_grids).
GRID_FPS = 5.0


class ReferringFormatError(UserInputError):
    """A benchmark file is malformed; the message names the file, video and field."""


@dataclass(frozen=True)
class ReferringVideo:
    """One video of a benchmark: its frame names and its expressions ``(exp_id, text)`` in file order."""

    video: str
    frames: tuple[str, ...]
    expressions: tuple[tuple[str, str], ...]


def read_meta_expressions(path: str | Path) -> list[ReferringVideo]:
    """The videos of a ``meta_expressions.json`` (MeViS's or Ref-YouTube-VOS's layout)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"meta_expressions file {path} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ReferringFormatError(f"{path}: not valid JSON ({err})") from None
    videos = data.get("videos") if isinstance(data, Mapping) else None
    if not isinstance(videos, Mapping):
        raise ReferringFormatError(f"{path}: expected an object with a 'videos' object")
    out = []
    for video, entry in videos.items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("frames"), list) or not entry["frames"] \
                or not isinstance(entry.get("expressions"), Mapping):
            raise ReferringFormatError(f"{path}, video '{video}': expected 'frames' (a non-empty list) and "
                                       "'expressions' (an object)")
        expressions = []
        for exp_id, expression in entry["expressions"].items():
            if not isinstance(expression, Mapping) or not isinstance(expression.get("exp"), str):
                raise ReferringFormatError(f"{path}, video '{video}', expression '{exp_id}': expected 'exp' (text)")
            expressions.append((str(exp_id), expression["exp"]))
        out.append(ReferringVideo(str(video), tuple(str(f) for f in entry["frames"]), tuple(expressions)))
    return out


def read_listed_frames(folder: str | Path, names: Iterable[str]) -> np.ndarray:
    """``(N, H, W, 3)`` uint8: the JPEGs ``folder/<name>.jpg`` in the order listed (Ref-YouTube-VOS lists
    every fifth source frame, so the numbers are not contiguous)."""
    from PIL import Image

    frames = []
    for name in names:
        path = Path(folder) / f"{name}.jpg"
        if not path.is_file():
            raise FileNotFoundError(f"frame {path} (listed in meta_expressions.json) does not exist")
        with Image.open(path) as image:
            frames.append(np.asarray(image.convert("RGB")))
    if len({f.shape for f in frames}) > 1:
        raise ReferringFormatError(f"{folder}: the listed frames differ in size")
    return np.stack(frames)


def video_record(video: ReferringVideo, frames: np.ndarray, folder: Path) -> GroundedRecord:
    """The unannotated record of a benchmark video: one clip, every listed frame on its grid."""
    info = VideoInfo(folder, video.video, len(frames), GRID_FPS, int(frames.shape[2]), int(frames.shape[1]))
    record = unannotated_record(info)
    if record.frame_indices.tolist() != list(range(len(frames))):  # grid frame = position in the list
        raise AssertionError(f"{video.video}: the grid is not every listed frame")
    return record


def referent_masks(entry: Mapping, num_frames: int, height: int, width: int) -> np.ndarray:
    """``(num_frames, H, W)`` bool: the referent's mask per grid position (its box filled without a masker)."""
    out = np.zeros((num_frames, height, width), dtype=bool)
    for frame, item in referent_tube(entry).items():
        if item.get("mask"):
            out[frame] = decode_masks([item["mask"]])[0]
        else:
            x1, y1, x2, y2 = (int(round(v)) for v in item["box"])
            out[frame, max(y1, 0):max(y2, 0), max(x1, 0):max(x2, 0)] = True
    return out


def write_pngs(folder: Path, names: Iterable[str], masks: np.ndarray) -> None:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for name, mask in zip(names, masks):
        Image.fromarray(mask.astype(np.uint8) * 255).save(folder / f"{name}.png")


Grounder = Callable[[ReferringVideo, np.ndarray, GroundedRecord, list], dict]


def model_grounder(model, processor) -> Grounder:
    """GROVE's answers: ``grounder(video, frames, record, queries)`` -> per query key its entry
    (:func:`models.grove.query_grounding.ground_queries` at the processor's settings)."""
    inference = processor.inference

    def ground(video: ReferringVideo, frames: np.ndarray, record: GroundedRecord, queries: list) -> dict:
        return ground_queries(model, processor.sample(frames, record), queries, inference["objectness_threshold"],
                              inference["objectness_strict"], inference["window_mode"], processor.masker,
                              frames if processor.masker is not None else None)

    return ground


def predict_benchmark(grounder: Grounder, check: Callable[[str], object], meta: str | Path, jpeg_root: str | Path,
                      out: str | Path, benchmark: str = "mevis", limit: int | None = None,
                      progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
    """Ground every expression of ``meta`` on the frames under ``jpeg_root`` with ``grounder``
    (:func:`model_grounder`) and write the submission (see the module docstring). ``check(text)`` gives
    the checked query or raises a QueryError (``lambda t: parse_queries(model, [t])[0]``). Returns the
    counts of videos, expressions and refused expressions."""
    if benchmark not in BENCHMARKS:
        raise ValueError(f"benchmark must be one of {BENCHMARKS}, got {benchmark!r}")
    out = Path(out)
    masks_root = out / "Annotations" if benchmark == "ref-youtube-vos" else out
    videos = read_meta_expressions(meta)[:limit]
    predictions: dict[str, dict] = {}
    refused: dict[str, str] = {}
    for n, video in enumerate(videos, 1):
        folder = Path(jpeg_root) / video.video
        frames = read_listed_frames(folder, video.frames)
        record = video_record(video, frames, folder)
        height, width = frames.shape[1:3]
        asked = []
        for exp_id, text in video.expressions:
            try:
                asked.append((exp_id, check(text)))
            except QueryError as err:
                refused[f"{video.video}_{exp_id}"] = str(err)
                write_pngs(masks_root / video.video / exp_id, video.frames,
                           np.zeros((len(frames), height, width), dtype=bool))
        entries = grounder(video, frames, record, [q for _, q in asked]) if asked else {}
        for i, (exp_id, query) in enumerate(asked):
            entry = entries[query_key(record.key, i)]
            masks = referent_masks(entry, len(frames), height, width)
            write_pngs(masks_root / video.video / exp_id, video.frames, masks)
            rles = encode_masks(masks)
            predictions[f"{video.video}_{exp_id}"] = {
                "caption": query.text, "tagged_caption": query.tagged_caption, "phrases": [entry["referent"]],
                "frames": [{"frame": f, "boxes": [item["box"]], "labels": [entry["referent"]],
                            "scores": [item["score"]], "masks": [rles[f]]}
                           for f, item in sorted(referent_tube(entry).items())]}
        if progress is not None:
            progress(n, len(videos))
    out.mkdir(parents=True, exist_ok=True)
    (out / "predictions.json").write_text(json.dumps(predictions), encoding="utf-8")
    (out / "refused.json").write_text(json.dumps(refused, indent=1), encoding="utf-8")
    return {"videos": len(videos), "expressions": len(predictions) + len(refused), "refused": len(refused)}


def model_check(model) -> Callable[[str], object]:
    """``check`` for :func:`predict_benchmark`: the model's own query checks."""
    return lambda text: parse_queries(model, [text])[0]


__all__ = ["BENCHMARKS", "ReferringFormatError", "ReferringVideo", "model_check", "model_grounder",
           "predict_benchmark", "read_listed_frames", "read_meta_expressions", "referent_masks", "video_record"]
