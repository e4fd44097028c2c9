"""Scoring entity linking over a whole video with the standard multi-object-tracking identity measures.

The entities of a timeline are tracks (one id, one box per grid frame where seen); the long
synthetic videos' ground truth (:mod:`longvideo.synthetic_long`) gives true tracks. Both go to
TrackEval's HOTA (Luiten et al., "HOTA: A Higher Order Metric for Evaluating Multi-Object
Tracking", IJCV 2021: HOTA, DetA, AssA averaged over IoU thresholds 0.05..0.95), Identity
(Ristani et al., 2016: IDF1) and CLEAR (MOTA, ID switches) on the grid frames, matched by box IoU.

:func:`clips_from_truth` builds per-clip predictions from the true boxes with the identities
hidden (each clip's phrases in random order, named by the object's phrase or a paraphrase), so
the linking step can be scored alone.
"""
from __future__ import annotations

from core.box_ops import numpy_box_iou_pairwise as box_iou

from typing import Any, Mapping, Sequence

import numpy as np

from formats.frame_grids import annotation_step
from longvideo.clip_records import truth_clips, video_stem

METRIC_NAMES = ("HOTA", "DetA", "AssA", "IDF1", "MOTA", "IDSW")


class TruthMismatchError(ValueError):
    """A ground truth recorded for another video than the one a timeline describes."""


def check_truth_matches_video(truth: Mapping[str, Any], video: Mapping[str, Any], truth_source: str = "--truth",
                              video_source: str = "--timeline") -> None:
    """Refuse a ground truth whose recorded video differs from the timeline's video (``video``:
    its entry in ``timeline.json``): frame count (duration), frame size and frame rate must agree,
    else the scores would compare boxes of one video with another's. The message names both values."""
    fps_truth, fps_video = float(truth["fps"]), float(video["fps"])
    differ = []
    if abs(fps_truth - fps_video) > 1e-3 * max(fps_truth, fps_video, 1.0):
        differ.append(f"frame rate {fps_truth:g} fps in the truth, {fps_video:g} fps in the timeline")
    if int(truth["num_frames"]) != int(video["num_frames"]):
        seconds = (f" ({int(truth['num_frames']) / fps_truth:.2f} s vs {int(video['num_frames']) / fps_video:.2f} s)"
                   if fps_truth > 0 and fps_video > 0 else "")
        differ.append(f"{int(truth['num_frames'])} frames in the truth, {int(video['num_frames'])} in the "
                      f"timeline{seconds}")
    size_truth = (int(truth["width"]), int(truth["height"]))
    size_video = (int(video["width"]), int(video["height"]))
    if size_truth != size_video:
        differ.append(f"frame size {size_truth[0]}x{size_truth[1]} in the truth, {size_video[0]}x{size_video[1]} "
                      "in the timeline")
    if differ:
        raise TruthMismatchError(
            f"{truth_source} describes another video than {video_source}'s {video.get('video_id', '?')!r} "
            f"({video.get('path', '?')}): {'; '.join(differ)}. The same file name does not make the same video: "
            "give the truth written with this video")


def entity_tracks(timeline: Mapping[str, Any]) -> dict[int, list[tuple[int, int, list[float]]]]:
    """Grid frame -> ``[(entity id, box)]`` from a timeline's entity tubes."""
    out: dict[int, list] = {}
    for entity in timeline["entities"]:
        for point in entity["tube"]:
            out.setdefault(int(point["frame"]), []).append((int(entity["id"]), point["box"]))
    return out


def trackeval_data(truth_frames: Sequence[Mapping[str, Any]],
                   predicted: Mapping[int, Sequence[tuple[int, Sequence[float]]]]) -> dict[str, Any]:
    """TrackEval's per-sequence input: ids made contiguous, IoU similarity per timestep (the truth's frames)."""
    gt_map: dict[int, int] = {}
    tr_map: dict[int, int] = {}
    gt_ids, tr_ids, sims = [], [], []
    for entry in truth_frames:
        g = np.array([gt_map.setdefault(int(i), len(gt_map)) for i in entry["ids"]], dtype=int)
        g_boxes = np.asarray(entry["boxes"], dtype=float).reshape(-1, 4)
        pred = predicted.get(int(entry["frame"]), [])
        t = np.array([tr_map.setdefault(int(i), len(tr_map)) for i, _ in pred], dtype=int)
        t_boxes = np.asarray([b for _, b in pred], dtype=float).reshape(-1, 4)
        gt_ids.append(g)
        tr_ids.append(t)
        sims.append(box_iou(g_boxes[:, None], t_boxes[None]) if len(g) and len(t) else np.zeros((len(g), len(t))))
    return {"num_timesteps": len(truth_frames), "num_gt_ids": len(gt_map), "num_tracker_ids": len(tr_map),
            "num_gt_dets": int(sum(len(g) for g in gt_ids)), "num_tracker_dets": int(sum(len(t) for t in tr_ids)),
            "gt_ids": gt_ids, "tracker_ids": tr_ids, "similarity_scores": sims, "seq": "video"}


def identity_scores(truth_frames: Sequence[Mapping[str, Any]],
                    predicted: Mapping[int, Sequence[tuple[int, Sequence[float]]]]) -> dict[str, float]:
    """HOTA, DetA, AssA (means over the IoU thresholds), IDF1, MOTA and ID switches."""
    from trackeval.metrics import CLEAR, HOTA, Identity

    data = trackeval_data(truth_frames, predicted)
    quiet = {"PRINT_CONFIG": False}
    hota = HOTA(quiet).eval_sequence(data)
    identity = Identity(quiet).eval_sequence(data)
    clear = CLEAR(quiet).eval_sequence(data)
    return {"HOTA": float(np.mean(hota["HOTA"])), "DetA": float(np.mean(hota["DetA"])),
            "AssA": float(np.mean(hota["AssA"])), "IDF1": float(identity["IDF1"]), "MOTA": float(clear["MOTA"]),
            "IDSW": int(clear["IDSW"])}


PARAPHRASES = ("the {colour} {shape}", "a {colour} {shape}", "the {shape}", "a {colour} shape", "the {colour} object")


def clips_from_truth(truth: Mapping[str, Any], clip_seconds: float = 8.0, paraphrase: float = 0.5,
                     seed: int = 0) -> tuple[list[dict], dict[str, dict]]:
    """Per-clip "predictions" made of the true boxes, identities hidden: ``(clips, predictions)`` in the
    forms :func:`longvideo.timeline.build_timeline` takes.

    Clips are cut as long-video predict cuts them (grid mode). In each clip every visible object
    becomes one phrase: its phrase, or with probability ``paraphrase`` a paraphrase drawn for this
    clip (``the cross``, ``a yellow shape``); look-alikes sharing a phrase in one clip are told
    apart by a number ("a yellow cross 2"), in random order.
    """
    rng = np.random.default_rng(seed)
    fps = float(truth["fps"])
    step = annotation_step(fps)
    phrase_of = {int(o["id"]): o["phrase"] for o in truth["objects"]}
    frames = {int(f["frame"]): f for f in truth["frames"]}
    clips, predictions = [], {}
    for index, grid in truth_clips(truth, clip_seconds):
        key = f"{video_stem(truth)}_{index}"
        ids = sorted({i for f in grid for i in frames[int(f)]["ids"]})
        rng.shuffle(ids)
        names: dict[int, str] = {}
        for i in ids:
            words = phrase_of[i].split()
            colour, shape = words[-2], words[-1]
            name = phrase_of[i] if rng.random() >= paraphrase else \
                PARAPHRASES[int(rng.integers(len(PARAPHRASES)))].format(colour=colour, shape=shape)
            base, n = name, 2
            while name in names.values():
                name, n = f"{base} {n}", n + 1
            names[i] = name
        pred_frames = []
        for f in grid:
            entry = frames[int(f)]
            pairs = [(names[i], b) for i, b in zip(entry["ids"], entry["boxes"])]
            if pairs:
                pred_frames.append({"frame": int(f), "boxes": [b for _, b in pairs], "labels": [n for n, _ in pairs],
                                    "scores": [1.0] * len(pairs)})
        phrases = [names[i] for i in ids]
        predictions[key] = {"caption": ", ".join(phrases), "tagged_caption": "", "phrases": phrases,
                            "frames": pred_frames}
        clips.append({"key": key, "clip": index, "shot": 0, "frames": grid.tolist(), "start_frame": int(grid[0]),
                      "end_frame": min(int(grid[-1]) + step - 1, int(truth["num_frames"]) - 1)})
    return clips, predictions


def per_clip_tracks(clips: Sequence[Mapping[str, Any]], predictions: Mapping[str, Mapping[str, Any]]
                    ) -> dict[int, list[tuple[int, list[float]]]]:
    """The tracks with no linking at all: every phrase of every clip its own identity (the floor)."""
    out: dict[int, list] = {}
    next_id = 0
    for clip in clips:
        pred = predictions.get(clip["key"])
        if not pred:
            continue
        ids = {p: next_id + j for j, p in enumerate(dict.fromkeys(pred["phrases"]))}
        next_id += len(ids)
        for entry in pred["frames"]:
            for box, label in zip(entry["boxes"], entry["labels"]):
                out.setdefault(int(entry["frame"]), []).append((ids[label], box))
    return out
