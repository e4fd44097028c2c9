"""HowToCaption's clip timestamps as the Hugging Face hub distributes them: parquet.

HowToGround1M's clips were cut at HowToCaption's timestamps (Shvetsova et al., 2023; GROVE paper,
section 3). On the hub each split (``how_to_caption``, ``how_to_caption_grounded``) is one or more
parquet files with a row per video: ``video_id`` and ``description``, a list of
``{start, end, text: [str]}`` in seconds. Point ``clips.timestamps`` at one such file, at a folder
of them (every ``*.parquet`` under it) or at a glob (``data/how_to_caption-*.parquet``); other
columns are ignored. Clip ``i`` of a video is its ``i``-th description entry, as for the JSON
layout (:func:`annotation.clips.read_timestamps`).

A bad value (a missing description, a missing, non-finite or non-numeric start or end) in the row of
a video the run annotates is an error naming the file, the row, the video and the field. In the row
of any other video it cannot matter: such rows are counted and named in one warning
(:func:`warn_ignored_rows`), and the run goes on.
"""
from __future__ import annotations

import glob
import warnings
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


def _seconds(values) -> tuple[np.ndarray, dict[int, str]]:
    """A ``start``/``end`` child array as float seconds (NaN where a value is bad) and, per bad value
    that is not simply missing or non-finite, why."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        return pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False), {}
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    out, why = np.full(len(values), np.nan), {}
    for i, value in enumerate(values.to_pylist()):  # only when some value is not a number at all
        try:
            out[i] = float(value)
        except (TypeError, ValueError):
            if value is not None:
                why[i] = f"{value!r} is not a number of seconds"
    return out, why


def warn_ignored_rows(source, ignored: list[str], what: str = "video(s) not in this run") -> None:
    """One warning that counts the bad rows left out because no clip of the run comes from them."""
    if ignored:
        shown = "; ".join(ignored[:5]) + ("; ..." if len(ignored) > 5 else "")
        warnings.warn(f"clips.timestamps: {source}: {len(ignored)} row(s) of {what} have bad values and are "
                      f"ignored: {shown}", UserWarning, stacklevel=3)


def read_howtocaption(source: str | Path, video_ids: Iterable[str] | None = None,
                      ) -> dict[str, list[tuple[float, float]]]:
    """``{video_id: [(start_s, end_s), ...]}`` from HowToCaption parquet (only ``video_ids`` when given).

    Read batch by batch, two columns, the spans gathered with Arrow's list offsets: the whole split
    is never held as Python objects, only the spans kept. A video given in two rows (or shards)
    is an error naming both places. Bad rows: see the module docstring (with ``video_ids`` None
    every video is wanted, so every bad row is an error).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    wanted = None if video_ids is None else set(map(str, video_ids))
    out: dict[str, list[tuple[float, float]]] = {}
    where: dict[str, str] = {}
    ignored: list[str] = []
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
            # rows whose problems are errors: the run's videos (a row without a video id is none of them)
            keep = np.array([v is not None and (wanted is None or str(v) in wanted) for v in ids], bool)
            for i in (n for n, v in enumerate(ids) if v is None):
                if wanted is None:
                    raise ValueError(f"clips.timestamps: {path}, row {first_row + i}: video_id is missing")
                ignored.append(f"{path}, row {first_row + i}: video_id is missing")

            def bad_row(i: int, why: str) -> None:
                text = f"{path}, row {first_row + i} (video '{ids[i]}'){why}"
                if keep[i]:
                    raise ValueError(f"clips.timestamps: {text}")
                ignored.append(text)

            description = batch.column("description")
            if not (pa.types.is_list(description.type) or pa.types.is_large_list(description.type)):
                raise ValueError(f"clips.timestamps: {path}: column description must be a list of "
                                 f"{{start, end, text}}, got {description.type}")
            no_description = description.is_null().to_numpy(zero_copy_only=False) if description.null_count \
                else np.zeros(len(ids), bool)
            for i in np.flatnonzero(no_description).tolist():
                bad_row(i, ": description is missing")
            offsets = description.offsets.to_numpy()
            offsets = offsets - offsets[0]
            entries = description.flatten()
            counts = np.diff(offsets)
            rows = np.repeat(np.arange(len(ids)), counts)
            entry_index = np.arange(len(entries)) - np.repeat(offsets[:-1], counts)
            fields = {f.name for f in entries.type} if pa.types.is_struct(entries.type) else set()
            if not {"start", "end"} <= fields:
                raise ValueError(f"clips.timestamps: {path}: description entries have no start/end "
                                 f"(fields: {', '.join(sorted(fields))})")
            starts, start_why = _seconds(entries.field("start"))
            ends, end_why = _seconds(entries.field("end"))
            bad = ~np.isfinite(starts) | ~np.isfinite(ends)
            reported = set(np.flatnonzero(no_description).tolist())
            for e in np.flatnonzero(bad).tolist():  # bad entries, in order; one report per row
                i = int(rows[e])
                if i in reported:
                    continue
                name, why = ("start", start_why) if not np.isfinite(starts[e]) else ("end", end_why)
                bad_row(i, f", description[{int(entry_index[e])}].{name}: {why.get(e, 'missing or not finite')}")
                reported.add(i)
            for i, video_id in enumerate(ids):
                if not keep[i] or i in reported:
                    continue
                video_id = str(video_id)
                here = f"{path}, row {first_row + i}"
                if video_id in out:
                    raise ValueError(f"clips.timestamps: video '{video_id}' is given twice ({where[video_id]} "
                                     f"and {here})")
                a, b = offsets[i], offsets[i + 1]
                out[video_id] = list(zip(starts[a:b].tolist(), ends[a:b].tolist()))
                where[video_id] = here
            first_row += len(ids)
    warn_ignored_rows(source, ignored)
    return out
