"""VidSTG ground truth for TubeDETR's evaluation: each sentence with its target's box on every frame
of the tube, read from the annotation file (either layout :mod:`datamodules.vidstg` reads).

The training records hold boxes only on the project's sampling grid; TubeDETR's evaluation grid
is another one, so the evaluator reads the boxes of every tube frame here. Sentence keys, types,
spans and targets come from :func:`datamodules.vidstg.read_vidstg` (same keys, same validation);
boxes are the file's, unclipped, as TubeDETR reads them.
"""
from __future__ import annotations

from core.json_file import read_json

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from formats.records import RecordError

if TYPE_CHECKING:
    from datamodules.vidstg import VidORTrajectories


@dataclass
class VidSTGSentence:
    """One VidSTG sentence as plain data.

    ``segment`` and ``tube`` are ``[start, end)`` source frames (TubeDETR evaluates the used
    segment); ``boxes`` maps source frames to the target's ``xyxy`` box and must cover the tube's
    grid frames; ``frames`` overrides TubeDETR's grid (``grid="record"``).
    """

    key: str
    sentence_type: str
    fps: float
    segment: tuple[int, int]
    tube: tuple[int, int]
    boxes: Mapping[int, Sequence[float]]
    frames: np.ndarray | None = field(default=None, repr=False)


def _tubedetr_boxes(data: Mapping, vid: str, target: int, tube: tuple[int, int]) -> dict[int, list[float]]:
    track = data["trajectories"].get(vid, {}).get(str(target), {})
    out = {}
    for f in range(*tube):
        item = track.get(str(f))
        if item is not None:
            x, y, w, h = (float(v) for v in item["bbox"])
            out[f] = [x, y, x + w, y + h]
    return out


def _frame_list_boxes(trajectories: list, offset: int, target: int, tube: tuple[int, int]) -> dict[int, list[float]]:
    out = {}
    for f in range(*tube):
        i = f - offset
        if not 0 <= i < len(trajectories):
            continue
        for obj in trajectories[i] or ():
            if int(obj.get("tid", -1)) == target:
                b = obj["bbox"]
                out[f] = [float(b["xmin"]), float(b["ymin"]), float(b["xmax"]), float(b["ymax"])]
                break
    return out


def _vidstg_trajectories(entries: list, vidor: VidORTrajectories | None, path: Path) -> dict[str, tuple[list, int]]:
    """vid -> (per-frame object lists, index offset), as :mod:`datamodules.vidstg` locates them."""
    out: dict[str, tuple[list, int]] = {}
    for e, entry in enumerate(entries):
        vid = str(entry["vid"])
        if vid in out:
            continue
        if "trajectories" in entry:
            traj = entry["trajectories"]
            used = entry["used_segment"]
            offset = 0 if len(traj) == int(entry.get("frame_count", len(traj))) else int(used["begin_fid"])
            out[vid] = (traj, offset)
        elif vidor is not None:
            out[vid] = (vidor.video(vid, f"{path}, entry #{e}")["trajectories"], 0)
    return out


def read_vidstg_sentences(path: str | Path, vidor_annotations: str | Path | None = None) -> list[VidSTGSentence]:
    """One :class:`VidSTGSentence` per sentence: used segment, tube, and the target's box on every
    tube frame where the file has one."""
    # the reader lives with the DataModule (Lightning): imported when a file is read, not on --help
    from datamodules.vidstg import VidORTrajectories, read_vidstg

    path = Path(path)
    records = read_vidstg(path, vidor_annotations, segment="used")
    data: Any = read_json(path)
    if isinstance(data, Mapping):
        lookup = lambda vid, target, tube: _tubedetr_boxes(data, vid, target, tube)  # noqa: E731
    else:
        vidor = VidORTrajectories(vidor_annotations) if vidor_annotations is not None else None
        trajectories = _vidstg_trajectories(data, vidor, path)

        def lookup(vid, target, tube):
            if vid not in trajectories:
                raise RecordError(f"{path}: no trajectories for video {vid}")
            traj, offset = trajectories[vid]
            return _frame_list_boxes(traj, offset, target, tube)
    sentences = []
    for r in records:
        tube = (int(r.extra["tube"][0]), int(r.extra["tube"][1]))
        used = (int(r.extra["used_segment"][0]), int(r.extra["used_segment"][1]))
        sentences.append(VidSTGSentence(r.key, r.extra["sentence_type"], float(r.fps), used, tube,
                                        lookup(r.video_id, int(r.extra["target_id"]), tube)))
    return sentences
