"""The built-in synthetic dataset on disk: generated once, in parallel, atomically; reused after.

Clips come from :mod:`datamodules.synthetic_scenes` (what a clip shows and its exact boxes);
this module writes them as videos plus annotation files in the project's record format
(``root/videos/<key>.mp4``, ``root/annotations/{train,val,test}.json``). ``grove synthetic --root DIR``
generates and inspects them from the command line.
"""
from __future__ import annotations

from core.json_file import read_json

import json
import logging
import os
import re
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from datamodules.synthetic_scenes import SPLITS, SyntheticConfig, clip_rng, generate_clip
from formats.records import GroundedRecord, read_records, write_records_json
from formats.video_writer import write_video

log = logging.getLogger(__name__)
GENERATOR_VERSION = 1


def _make_clip(task: tuple[dict, str, int, str]) -> dict:
    """Worker: generate, encode and return one clip's record as a dict (picklable, cheap to send)."""
    config_json, split, index, videos_dir = task
    config = SyntheticConfig(**config_json)
    frames, record = generate_clip(clip_rng(config.seed, split, index), config, split, index)
    # one encoder thread: the clips are already spread over the worker processes
    write_video(Path(videos_dir) / record.video_fname, frames, config.fps, crf=config.crf, preset=config.preset,
                threads=1)
    return record.to_dict()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_staging(root: Path) -> None:
    """Remove staging folders of interrupted runs (their process is gone)."""
    for path in root.glob(".staging-*"):
        match = re.match(r"\.staging-(\d+)-", path.name)
        if match and not _pid_alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)


def _write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(path)


def _annotation_paths(root: Path) -> dict[str, Path]:
    return {split: root / "annotations" / f"{split}.json" for split in SPLITS}


def generate_synthetic_dataset(root: str | Path, num_train: int = 2000, num_val: int = 200, num_test: int = 200,
                               seed: int = 0, workers: int = 2, on_config_change: str = "regenerate",
                               **config: Any) -> dict[str, Path]:
    """Generate (or reuse) the synthetic dataset under ``root``; returns ``{split: annotation JSON}``.

    Layout: ``root/videos/<key>.mp4``, ``root/annotations/{train,val,test}.json``,
    ``root/manifest.json`` (config, generator version, ``complete``). Everything is generated in a
    staging folder and moved into place before the manifest says ``complete``, so an interrupted
    run is never reused. A root holding ``videos/`` or ``annotations/`` without a manifest is
    refused (``FileExistsError``) rather than overwritten.
    A second call with the same config returns at once. With a different config the old data is
    replaced (``on_config_change="regenerate"``, logged) or a ``ValueError`` is raised
    (``"error"``). Each clip is seeded by ``(seed, split, index)``: output is the same for any
    ``workers`` (processes; ``<= 1`` generates in this process).
    """
    if on_config_change not in ("regenerate", "error"):
        raise ValueError(f"on_config_change must be 'regenerate' or 'error', got {on_config_change!r}")
    cfg = SyntheticConfig(num_train=num_train, num_val=num_val, num_test=num_test, seed=seed, **config)
    root = Path(root)
    wanted = {"generator_version": GENERATOR_VERSION, "config": cfg.to_json()}
    paths = _annotation_paths(root)
    manifest_path = root / "manifest.json"
    if manifest_path.exists():
        try:
            existing = json.loads(manifest_path.read_text())
        except json.JSONDecodeError:
            existing = {}
        existing = existing if isinstance(existing, dict) else {}
        same_config = {k: existing.get(k) for k in wanted} == wanted
        if same_config and existing.get("complete") and all(p.exists() for p in paths.values()):
            return paths
        if same_config:
            log.warning("%s: an earlier generation did not finish; regenerating", manifest_path)
        else:
            old = existing.get("config", {})
            changed = sorted(k for k in set(old) | set(wanted["config"]) if old.get(k) != wanted["config"].get(k))
            if existing.get("generator_version") != GENERATOR_VERSION:
                changed.append("generator_version")
            message = (f"{manifest_path}: the synthetic data there was made with another config "
                       f"(changed: {', '.join(changed)})")
            if on_config_change == "error":
                raise ValueError(message + "; delete the folder or pass on_config_change='regenerate'")
            log.warning("%s; regenerating", message)
    elif any((root / name).exists() for name in ("videos", "annotations")):
        raise FileExistsError(f"{root} holds videos/ or annotations/ but no manifest.json: not overwriting "
                              "data this generator did not make; choose another root")

    root.mkdir(parents=True, exist_ok=True)
    _remove_stale_staging(root)
    staging = Path(tempfile.mkdtemp(prefix=f".staging-{os.getpid()}-", dir=root))
    try:
        (staging / "videos").mkdir()
        tasks = [(cfg.to_json(), split, i, str(staging / "videos"))
                 for split, n in cfg.split_sizes().items() for i in range(n)]
        if workers > 1 and len(tasks) > 1:
            import multiprocessing as mp

            # fork: workers start in milliseconds and inherit the imported modules; they run
            # only numpy and PyAV, never torch, so forking a process that imported torch is safe
            methods = mp.get_all_start_methods()
            ctx = mp.get_context("fork" if "fork" in methods else None)
            with ctx.Pool(min(workers, len(tasks))) as pool:
                dicts = pool.map(_make_clip, tasks, chunksize=max(1, min(16, len(tasks) // (4 * workers))))
        else:
            dicts = [_make_clip(task) for task in tasks]
        by_split: dict[str, list[GroundedRecord]] = {split: [] for split in SPLITS}
        for (_, split, _, _), raw in zip(tasks, dicts):
            by_split[split].append(GroundedRecord.from_dict(raw, source="synthetic generator"))
        for split, records in by_split.items():
            write_records_json(records, staging / "annotations" / f"{split}.json")
        # swap in: mark the data incomplete (still ours), move the folders, then mark it complete
        manifest = {**wanted, "splits": cfg.split_sizes()}
        _write_json_atomic(manifest_path, {**manifest, "complete": False})
        for name in ("videos", "annotations"):
            if (root / name).exists():
                (root / name).rename(staging / f"old-{name}")
            (staging / name).rename(root / name)
        _write_json_atomic(manifest_path, {**manifest, "complete": True})
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return paths


def summarize_dataset(root: str | Path) -> dict[str, Any]:
    """Per split: clip count, objects-per-clip histogram, share of absent (frame, phrase) slots, actions."""
    root = Path(root)
    manifest_path = root / "manifest.json"
    if not manifest_path.exists():
        raise FileNotFoundError(f"{manifest_path} not found: no finished synthetic dataset under {root}")
    manifest = read_json(manifest_path)
    out: dict[str, Any] = {"root": str(root), "config": manifest["config"], "splits": {}}
    for split, path in _annotation_paths(root).items():
        records = read_records(path)
        slots = sum(len(r.labels) * len(r.phrases) for r in records)
        present = sum(int(r.presence().sum()) for r in records)
        actions = Counter(o["action"] for r in records for o in r.extra.get("synthetic", {}).get("objects", []))
        words = [len(r.caption.split()) for r in records]
        out["splits"][split] = {
            "clips": len(records),
            "objects_per_clip": dict(sorted(Counter(len(r.phrases) for r in records).items())),
            "absent_slot_share": round(1.0 - present / slots, 4) if slots else None,
            "actions": dict(sorted(actions.items())),
            "mean_caption_words": round(float(np.mean(words)), 2) if words else None,
            "max_caption_words": max(words, default=None),
            "examples": [r.tagged_caption for r in records[:3]],
        }
    return out


def finished_config(root: str | Path) -> dict[str, Any] | None:
    """The generation config of the finished dataset under ``root`` (from its manifest), or None."""
    manifest_path = Path(root) / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(manifest, dict) or not manifest.get("complete"):
        return None
    if manifest.get("generator_version") != GENERATOR_VERSION:
        return None
    return manifest.get("config") if isinstance(manifest.get("config"), dict) else None
