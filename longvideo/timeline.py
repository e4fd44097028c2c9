"""The timeline of a long video: its segments, its entities (one id, name and tube each) and its story.

Built from the per-clip predictions (the format of ``predictions_predict.json``), the clips'
places in the video, and optional per-phrase appearance vectors; the phrases are linked into
entities by :func:`longvideo.linking.link_clips`. The JSON layout is ``timeline_schema.json``
beside this file (``format: grove-timeline``, ``version: 1``):

- ``segments``: per clip, in time order: key, shot, frames and seconds, caption, and each phrase
  with the entity it belongs to (``null`` for a clip that was not predicted);
- ``gaps``: stretches that could not be decoded, with the decoder's reason;
- ``entities``: id, name (the most informative phrase), all its phrases, the segments it is in,
  and its tube: one box per grid frame where it was seen, with the score, and the box's mask (COCO
  RLE, the video's frame size) where the clip's predictions carry masks;
- ``story``: the clip captions in order, and an optional summary caption with the entity each of its
  tagged phrases stands for.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from formats.frame_grids import annotation_step
from longvideo.linking import ClipTubes, Entity, LinkingWeights, link_by_names, link_clips

TIMELINE_FORMAT = "grove-timeline"
TIMELINE_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("timeline_schema.json")


def clip_tubes(frames: Sequence[int], prediction: Mapping[str, Any], text: np.ndarray | None = None,
               appearance: np.ndarray | None = None) -> ClipTubes:
    """A clip's prediction (prediction format) as :class:`ClipTubes` on the clip's grid ``frames``.

    Phrases are the distinct phrases of the prediction; boxes labelled with a phrase are its tube, and
    their masks (the entries' ``masks``, where present) its masks."""
    phrases = list(dict.fromkeys(prediction.get("phrases", [])))
    frames = np.asarray(frames, dtype=np.int64)
    row = {int(f): i for i, f in enumerate(frames)}
    col = {p: j for j, p in enumerate(phrases)}
    boxes = np.zeros((len(phrases), len(frames), 4))
    present = np.zeros((len(phrases), len(frames)), dtype=bool)
    scores = np.zeros((len(phrases), len(frames)))
    masks = np.full((len(phrases), len(frames)), None, dtype=object)
    for entry in prediction.get("frames", []):
        f = row.get(int(entry["frame"]))
        if f is None:
            continue
        entry_masks = entry.get("masks") or [None] * len(entry.get("boxes", []))
        for k, (box, label) in enumerate(zip(entry.get("boxes", []), entry.get("labels", []))):
            p = col.get(label)
            score = float(entry["scores"][k]) if "scores" in entry else 1.0
            if p is not None and (not present[p, f] or score > scores[p, f]):
                boxes[p, f], present[p, f], scores[p, f] = box, True, score
                masks[p, f] = entry_masks[k] if k < len(entry_masks) else None
    any_mask = any(m is not None for m in masks.flat)
    return ClipTubes(frames, phrases, boxes, present, scores, text, appearance, masks if any_mask else None)


def _seconds(frame: int, fps: float) -> float:
    return round(float(frame) / float(fps), 3)


def text_vectors(predictions: Mapping[str, Mapping[str, Any]], encoder: str) -> dict[str, np.ndarray]:
    """Phrase -> unit sentence embedding (the meaning cue of :func:`build_timeline`) for every phrase
    of the predictions, each phrase encoded once with the text encoder named ``encoder``."""
    from metrics.text_encoder import build_text_encoder, encode_unique

    phrases = sorted({p for pred in predictions.values() for p in pred.get("phrases", [])})
    if not phrases:
        return {}
    unique, embeddings, _ = encode_unique(build_text_encoder(encoder), phrases)
    return {p: e for p, e in zip(unique, embeddings.float().numpy())}


def build_timeline(video: Mapping[str, Any], clips: Sequence[Mapping[str, Any]],
                   predictions: Mapping[str, Mapping[str, Any]], gaps: Sequence[Mapping[str, Any]] = (),
                   text_vectors: Mapping[str, np.ndarray] | None = None,
                   appearance: Mapping[str, np.ndarray] | None = None, weights: LinkingWeights | None = None,
                   names: Mapping[str, Sequence[str | None]] | None = None, summary: str | None = None,
                   segmenter: str = "grid") -> dict[str, Any]:
    """The timeline of one video.

    Args:
        video: ``video_id, path, fps, num_frames, width, height``.
        clips: per clip ``key, clip, shot, frames, start_frame, end_frame`` (any order).
        predictions: prediction-format entries by clip key (a clip without one was skipped).
        gaps: ``first_frame, last_frame, start_s, end_s, reason`` of each undecodable stretch.
        text_vectors: phrase -> unit embedding (the meaning cue).
        appearance: clip key -> ``(P, D)`` vectors for the clip's distinct phrases, in order.
        weights: the linking's cue weights and threshold (default: ``LinkingWeights`` with the
            box cue reaching one grid step).
        names: clip key -> video-level name per distinct phrase (a language step's linking);
            given, it replaces the cue-based linking.
        summary: an optional summary caption for the story.
    """
    fps = float(video["fps"])
    step = annotation_step(fps)
    weights = weights or LinkingWeights(adjacent_frames=step)
    ordered = sorted(clips, key=lambda c: (int(c["start_frame"]), int(c["clip"])))
    predicted = [c for c in ordered if c["key"] in predictions]
    tubes = []
    for c in predicted:
        pred = predictions[c["key"]]
        phrases = list(dict.fromkeys(pred.get("phrases", [])))
        text = np.stack([text_vectors[p] for p in phrases]) if text_vectors is not None and phrases else None
        app = appearance.get(c["key"]) if appearance is not None else None
        tubes.append(clip_tubes(c["frames"], pred, text, app if app is not None and len(app) == len(phrases) else None))
    if names is not None:
        ids = link_by_names([t.phrases for t in tubes], [names.get(c["key"], [None] * len(t.phrases))
                                                         for c, t in zip(predicted, tubes)])
        entities: dict[int, Entity] = {}
        for c_index, (t, row) in enumerate(zip(tubes, ids)):
            for p, e in enumerate(row):
                entities.setdefault(e, Entity(id=e)).add(c_index, t, p)
        entity_list = [entities[e] for e in sorted(entities)]
    else:
        ids, entity_list = link_clips(tubes, weights)
    link_of = {c["key"]: row for c, row in zip(predicted, ids)}
    summary_links: dict[str, int] = {}  # a summary phrase -> the entity of the clip phrases put into it
    for c, t in zip(predicted, tubes):
        for name, e in zip((names or {}).get(c["key"], []), link_of[c["key"]]):
            if name is not None:
                summary_links.setdefault(name, int(e))
    segments = []
    for c in ordered:
        pred = predictions.get(c["key"])
        phrases = list(dict.fromkeys(pred.get("phrases", []))) if pred else []
        segments.append({
            "key": c["key"], "index": int(c["clip"]), "shot": int(c.get("shot", 0)),
            "start_frame": int(c["start_frame"]), "end_frame": int(c["end_frame"]),
            "start_s": _seconds(c["start_frame"], fps), "end_s": _seconds(int(c["end_frame"]) + 1, fps),
            "caption": pred.get("caption") if pred else None,
            "tagged_caption": pred.get("tagged_caption") if pred else None,
            "phrases": [{"phrase": p, "entity": int(e)} for p, e in zip(phrases, link_of.get(c["key"], []))],
        })
    key_of_clip = [c["key"] for c in predicted]
    entities_out = []
    for entity in entity_list:
        frames = sorted(entity.tube)
        entities_out.append({
            "id": int(entity.id), "name": entity.name,
            "phrases": list(dict.fromkeys(p for _, p in entity.mentions)),
            "segments": list(dict.fromkeys(key_of_clip[c] for c, _ in entity.mentions)),
            "first_s": _seconds(frames[0], fps) if frames else None,
            "last_s": _seconds(frames[-1], fps) if frames else None,
            "tube": [{"frame": int(f), "time_s": _seconds(f, fps),
                      "box": [round(float(v), 2) for v in entity.tube[f][0]],
                      "score": round(float(entity.tube[f][1]), 4),
                      **({"mask": entity.masks[f]} if f in entity.masks else {})} for f in frames],
        })
    return {
        "video_id": video["video_id"], "path": str(video.get("path", "")), "fps": fps,
        "num_frames": int(video["num_frames"]), "width": int(video["width"]), "height": int(video["height"]),
        "duration_s": _seconds(int(video["num_frames"]), fps), "segmenter": segmenter,
        "segments": segments,
        "gaps": [{"first_frame": int(g["first_frame"]), "last_frame": int(g["last_frame"]),
                  "start_s": round(float(g["start_s"]), 3), "end_s": round(float(g["end_s"]), 3),
                  "reason": str(g["reason"])} for g in gaps],
        "entities": entities_out,
        "story": {"captions": [s["caption"] for s in segments if s["caption"] is not None], "summary": summary,
                  "summary_phrases": [{"phrase": p, "entity": e} for p, e in summary_links.items()]},
    }


def timeline_document(videos: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The whole ``timeline.json``: format, version and one timeline per video."""
    return {"format": TIMELINE_FORMAT, "version": TIMELINE_VERSION, "videos": list(videos)}


def timeline_problems(document: Any) -> list[str]:
    """What makes ``document`` not a valid timeline (JSON Schema errors, each with its path); [] if valid."""
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))]


def read_timeline(path: str | Path) -> dict[str, Any]:
    """A ``timeline.json``, checked against the schema (an error names the file and what is wrong)."""
    path = Path(path)
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not JSON ({err})") from None
    problems = timeline_problems(document)
    if problems:
        raise ValueError(f"{path}: not a valid timeline: " + "; ".join(problems[:5]))
    return document
