"""(video, caption) pairs to be judged: pair files, FOIL pairs, and their clips' frames.

A pair file is JSONL (one object per line) or CSV (a header row) with ``video`` and ``caption``;
optional ``key`` (default: the line or row number) and the clip as ``start_s``/``end_s`` or
``start_frame``/``end_frame``. FOIL pairs (VC-Inspector paper, section 4.5) come from the
ActivityNet-FOIL release (``final_right_video_sentences.json`` and
``final_foil_video_sentences.json``, ``{"results": {video_id: [{"sentence": ...}, ...]}}``, with
the clips' timestamps in ``anet_entities_test_1.json``) or from the project's own corruption
generator (a corrupted row that changed exactly one object or action, against its reference).
"""
from __future__ import annotations

from core.json_file import read_json

import csv
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from torch.utils.data import Dataset

from formats.video_reader import VideoDecodeError
from judge.data.dataset import JudgeDataset
from judge.data.readers import JudgeDataError, iter_jsonl

CLIP_RANGES = (("start_s", "end_s"), ("start_frame", "end_frame"))


def _pair_row(raw: Any, where: str, default_key: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise JudgeDataError(f"{where}: expected an object with 'video' and 'caption', got {type(raw).__name__}")
    row = {"key": str(raw.get("key") or default_key)}
    for name in ("video", "caption"):
        value = raw.get(name)
        if not isinstance(value, str) or not value.strip():
            raise JudgeDataError(f"{where}: field '{name}' must be a non-empty string, got {value!r}")
        row[name] = value.strip()
    for lo, hi in CLIP_RANGES:
        a, b = raw.get(lo), raw.get(hi)
        if a in (None, "") and b in (None, ""):
            continue
        try:
            a, b = (float(a), float(b)) if lo == "start_s" else (int(a), int(b))
        except (TypeError, ValueError):
            raise JudgeDataError(f"{where}: fields '{lo}' and '{hi}' must be numbers given together, "
                                 f"got {a!r} and {b!r}") from None
        if not 0 <= a <= b:
            raise JudgeDataError(f"{where}: clip {lo}={a}, {hi}={b} is not a valid range")
        row[lo], row[hi] = a, b
    return row


def read_pairs(path: str | Path) -> list[dict[str, Any]]:
    """Validated pairs of a ``.jsonl`` / ``.json`` or ``.csv`` file; errors name the file, line and field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"pairs file {path} does not exist")
    rows = []
    if path.suffix.lower() == ".csv":
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            missing = {"video", "caption"} - set(reader.fieldnames or ())
            if missing:
                raise JudgeDataError(f"{path}: the CSV header lacks column(s) {sorted(missing)}")
            for number, raw in enumerate(reader, 2):
                rows.append(_pair_row(raw, f"{path}, row {number}", str(number - 2)))
    else:
        rows = [_pair_row(raw, f"{path}, line {number}", str(number - 1)) for number, raw in iter_jsonl(path)]
    keys = [r["key"] for r in rows]
    if len(set(keys)) != len(keys):
        raise JudgeDataError(f"{path}: keys must be unique (a resumed run finds pairs by key)")
    return rows


def read_activitynet_foil(folder: str | Path, video_template: str = "{video_id}.mp4") -> list[dict[str, Any]]:
    """ActivityNet-FOIL as pairs ``{key, video, original, foil[, start_s, end_s]}``, aligned by video and sentence."""
    folder = Path(folder)

    def results(name: str) -> dict:
        path = folder / name
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise JudgeDataError(f"{path}: cannot read ActivityNet-FOIL sentences ({err})") from None
        if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
            raise JudgeDataError(f"{path}: expected {{'results': {{video_id: [{{'sentence': ...}}, ...]}}}}")
        return data["results"]

    right, foil = results("final_right_video_sentences.json"), results("final_foil_video_sentences.json")
    stamps_path = folder / "anet_entities_test_1.json"
    stamps = read_json(stamps_path) if stamps_path.is_file() else {}
    pairs = []
    for video_id, sentences in right.items():
        where = f"{folder}, video '{video_id}'"
        foils = foil.get(video_id)
        if not isinstance(foils, list) or len(foils) != len(sentences):
            raise JudgeDataError(
                f"{where}: the FOIL file has {len(foils or [])} sentences, the right one {len(sentences)}")
        for k, (a, b) in enumerate(zip(sentences, foils)):
            if not (isinstance(a, dict) and isinstance(b, dict) and isinstance(a.get("sentence"), str)
                    and isinstance(b.get("sentence"), str)):
                raise JudgeDataError(f"{where}, sentence {k}: expected {{'sentence': str}} in both files")
            pair = {"key": f"{video_id}_{k}", "video": video_template.format(video_id=video_id),
                    "original": a["sentence"].strip(), "foil": b["sentence"].strip()}
            timestamps = (stamps.get(video_id) or {}).get("timestamps") or []
            if k < len(timestamps):
                pair["start_s"], pair["end_s"] = (float(t) for t in timestamps[k])
            pairs.append(pair)
    return pairs


def foil_pairs_from_corruptions(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """FOIL pairs from the corruption generator's rows: every row with exactly one substitution,
    against its reference caption (``original_caption``) on the same clip."""
    pairs = []
    for row in rows:
        subs = row.get("substitutions")
        if not isinstance(subs, list) or len(subs) != 1 or not isinstance(row.get("original_caption"), str):
            continue
        pair = {"key": row["key"], "video": row["video"], "original": row["original_caption"], "foil": row["caption"]}
        for lo, hi in CLIP_RANGES:
            if row.get(lo) is not None:
                pair[lo], pair[hi] = row[lo], row[hi]
        pairs.append(pair)
    return pairs


def foil_rows(pairs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each FOIL pair as two pairs to score, keyed ``{key}#original`` and ``{key}#foil``."""
    clip = [lo for r in CLIP_RANGES for lo in r]
    return [{"key": f"{p['key']}#{side}", "video": p["video"], "caption": p[side],
             **{k: p[k] for k in clip if k in p}} for p in pairs for side in ("original", "foil")]


class PairFrames(Dataset):
    """The frames of each pair's clip, or the reason they could not be read (then ``frames`` is None)."""

    def __init__(self, rows: Sequence[dict[str, Any]], video_root: str | Path, num_frames: int):
        self.clips = JudgeDataset(rows, video_root, prompter=None, num_frames=num_frames, with_answer=False)

    def __len__(self) -> int:
        return len(self.clips)

    def __getitem__(self, index: int) -> dict[str, Any]:
        row = self.clips.rows[index]
        try:
            frames, fps = self.clips.clip_frames(row)
        except (VideoDecodeError, FileNotFoundError, OSError, ValueError) as err:
            return {"row": row, "frames": None, "fps": None, "error": f"video: {type(err).__name__}: {err}"}
        return {"row": row, "frames": np.ascontiguousarray(frames), "fps": fps, "error": None}


def collate_pairs(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return items


VIDEO_SUFFIXES = (".mp4", ".avi", ".mkv", ".webm", ".mov", ".m4v")


def _video_in(folder: Path, key: str) -> str | None:
    if (folder / key).exists():
        return key
    found = sorted(p.name for p in folder.glob(f"{key}.*") if p.suffix.lower() in VIDEO_SUFFIXES)
    return found[0] if found else None


def read_refinement_inputs(video_dir: str | Path, captions: str | Path | None = None) -> list[dict[str, Any]]:
    """Clips to refine captions for: ``{key, video, caption}`` (caption None when the captioner writes it).

    ``captions`` is a pair file (:func:`read_pairs`, videos relative to ``video_dir``) or a
    predictions JSON keyed by clip (``{key: {"caption": ...}}``, what GROVE's prediction writer
    saves), whose keys name videos in ``video_dir`` (``KEY`` or ``KEY.<ext>``). Without it, every
    video file in ``video_dir`` is a clip.
    """
    folder = Path(video_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"--videos {folder} is not a folder")
    if captions is None:
        names = sorted(p.name for p in folder.iterdir() if p.suffix.lower() in VIDEO_SUFFIXES)
        if not names:
            raise FileNotFoundError(f"{folder} holds no video file ({', '.join(VIDEO_SUFFIXES)})")
        return [{"key": Path(n).stem, "video": n, "caption": None} for n in names]
    path = Path(captions)
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise JudgeDataError(f"{path}: cannot read predictions JSON ({err})") from None
        if not isinstance(data, dict):
            raise JudgeDataError(f"{path}: expected predictions keyed by clip, {{key: {{'caption': ...}}}}")
        rows = []
        for key, pred in data.items():
            caption = pred.get("caption") if isinstance(pred, dict) else None
            if not isinstance(caption, str) or not caption.strip():
                raise JudgeDataError(f"{path}, key '{key}': field 'caption' must be a non-empty string")
            rows.append({"key": str(key), "video": _video_in(folder, str(key)) or str(key), "caption": caption.strip()})
        return rows
    return read_pairs(path)
