"""HowToCaption's clip timestamps as the Hugging Face hub distributes them: parquet.

HowToGround1M's clips were cut at HowToCaption's timestamps (Shvetsova et al., 2023; GROVE paper,
section 3). On the hub each split (``how_to_caption``, ``how_to_caption_grounded``) is one or more
parquet files with a row per video: ``video_id`` and ``description``, a list of
``{start, end, text: [str]}`` in seconds. Point ``clips.timestamps`` at one such file, at a folder
of them (every ``*.parquet`` under it) or at a glob (``data/how_to_caption-*.parquet``); other
columns are ignored. Clip ``i`` of a video is its ``i``-th description entry, as for the JSON
layout (:func:`annotation.clips.read_timestamps`).
"""
from __future__ import annotations

import glob
from pathlib import Path
from typing import Iterable

import numpy as np

PARQUET_SUFFIX = ".parquet"


def is_parquet_source(path: str | Path) -> bool:
    """A parquet file, a glob of them, or a folder holding some."""
    text = str(path)
    if text.lower().endswith(PARQUET_SUFFIX):
        return True
    folder = Path(text)
    return folder.is_dir() and any(folder.rglob(f"*{PARQUET_SUFFIX}"))


def parquet_files(source: str | Path) -> list[Path]:
    """The parquet files of a file, folder or glob, sorted (shards in their order)."""
    text = str(source)
    if any(c in text for c in "*?["):
        files = sorted(Path(p) for p in glob.glob(text))
    elif Path(text).is_dir():
        files = sorted(Path(text).rglob(f"*{PARQUET_SUFFIX}"))
    else:
        files = [Path(text)]
    if not files or not all(f.is_file() for f in files):
        raise FileNotFoundError(f"clips.timestamps: no HowToCaption parquet file at {source}")
    return files


def _seconds(values, path: Path, rows: np.ndarray, video_ids: list, entries: np.ndarray, name: str) -> np.ndarray:
    """A ``start``/``end`` child array as float seconds; the first bad value named by file, row, video, entry."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def bad(i: int, why: str) -> ValueError:
        return ValueError(f"clips.timestamps: {path}, row {int(rows[i])} (video '{video_ids[i]}'), "
                          f"description[{int(entries[i])}].{name}: {why}")

    try:
        out = pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        for i, value in enumerate(values.to_pylist()):
            try:
                float(value)
            except (TypeError, ValueError):
                raise bad(i, f"{value!r} is not a number of seconds") from None
        raise
    missing = np.flatnonzero(~np.isfinite(out))
    if len(missing):
        raise bad(int(missing[0]), "missing or not finite")
    return out


def read_howtocaption(source: str | Path, video_ids: Iterable[str] | None = None,
                      ) -> dict[str, list[tuple[float, float]]]:
    """``{video_id: [(start_s, end_s), ...]}`` from HowToCaption parquet (only ``video_ids`` when given).

    Read batch by batch, two columns, the spans gathered with Arrow's list offsets: the whole split
    is never held as Python objects, only the spans kept. A video given in two rows (or shards)
    is an error naming both places.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    wanted = None if video_ids is None else set(map(str, video_ids))
    out: dict[str, list[tuple[float, float]]] = {}
    where: dict[str, str] = {}
    for path in parquet_files(source):
        try:
            handle = pq.ParquetFile(path)
        except Exception as err:  # pyarrow raises several kinds for a file that is not parquet
            raise ValueError(f"clips.timestamps: {path} is not a readable parquet file ({err})") from None
        missing = [c for c in ("video_id", "description") if c not in handle.schema_arrow.names]
        if missing:
            raise ValueError(f"clips.timestamps: {path} has no column(s) {', '.join(missing)} "
                             f"(HowToCaption's are video_id and description: [{{start, end, text}}]; "
                             f"found {', '.join(handle.schema_arrow.names)})")
        first_row = 0
        for batch in handle.iter_batches(columns=["video_id", "description"], batch_size=65536):
            ids = batch.column("video_id").to_pylist()
            description = batch.column("description")
            if description.null_count:
                i = int(np.flatnonzero(description.is_null().to_numpy(zero_copy_only=False))[0])
                raise ValueError(f"clips.timestamps: {path}, row {first_row + i} (video '{ids[i]}'): "
                                 "description is missing")
            if not (pa.types.is_list(description.type) or pa.types.is_large_list(description.type)):
                raise ValueError(f"clips.timestamps: {path}: column description must be a list of "
                                 f"{{start, end, text}}, got {description.type}")
            offsets = description.offsets.to_numpy()
            offsets = offsets - offsets[0]
            entries = description.flatten()
            counts = np.diff(offsets)
            rows = np.repeat(np.arange(len(ids)) + first_row, counts)
            entry_index = np.arange(len(entries)) - np.repeat(offsets[:-1], counts)
            entry_ids = [ids[r - first_row] for r in rows.tolist()] if len(entries) else []
            fields = {f.name for f in entries.type} if pa.types.is_struct(entries.type) else set()
            if not {"start", "end"} <= fields:
                raise ValueError(f"clips.timestamps: {path}: description entries have no start/end "
                                 f"(fields: {', '.join(sorted(fields))})")
            starts = _seconds(entries.field("start"), path, rows, entry_ids, entry_index, "start")
            ends = _seconds(entries.field("end"), path, rows, entry_ids, entry_index, "end")
            for i, video_id in enumerate(ids):
                if video_id is None:
                    raise ValueError(f"clips.timestamps: {path}, row {first_row + i}: video_id is missing")
                video_id = str(video_id)
                if wanted is not None and video_id not in wanted:
                    continue
                here = f"{path}, row {first_row + i}"
                if video_id in out:
                    raise ValueError(f"clips.timestamps: video '{video_id}' is given twice ({where[video_id]} "
                                     f"and {here})")
                a, b = offsets[i], offsets[i + 1]
                out[video_id] = list(zip(starts[a:b].tolist(), ends[a:b].tolist()))
                where[video_id] = here
            first_row += len(ids)
    return out
