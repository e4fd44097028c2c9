"""The output folder: records, rejections, and what a re-run may skip.

``OUT/annotations/{video_id}_{clip_id}.pkl`` holds one record per accepted clip in the
HowToGround1M per-key layout (written by :func:`formats.records.write_records_pickle_folder`
into a staging folder, then renamed into place, so an interrupted run never leaves a partial
record). ``OUT/rejected/{key}.json`` holds each rejected clip's reason. A re-run skips clips
with either file; rejections caused by an unavailable backend are not stored, so they are redone.

File names are the keys through :func:`core.safe_names.safe_file_name`: the key itself for
ordinary ids, a readable name plus a hash for any other, never a path outside ``OUT``.
"""
from __future__ import annotations

from core.output_files import write_json_atomic
from core.safe_names import safe_file_name

import json
import os
import shutil
from pathlib import Path

from annotation.outcomes import Rejection
from formats.records import GroundedRecord, write_records_pickle_folder


class OutputFolder:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.annotations = self.root / "annotations"
        self.rejected = self.root / "rejected"
        self.staging = self.root / ".staging"
        for folder in (self.annotations, self.rejected, self.staging):
            folder.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def file_stem(key: str) -> str:
        """The name (without suffix) of a clip's files in ``annotations/`` and ``rejected/``."""
        return safe_file_name(key)

    def accepted_keys(self) -> set[str]:
        """File stems (:meth:`file_stem`) of the accepted clips."""
        return {p.stem for p in self.annotations.glob("*.pkl")}

    def rejected_reasons(self) -> dict[str, dict]:
        out = {}
        for path in self.rejected.glob("*.json"):
            try:
                out[path.stem] = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # an unreadable note only means the clip is redone
        return out

    def done_keys(self, retry_rejected: bool = False) -> set[str]:
        """File stems of the clips a re-run skips (compare with :meth:`file_stem` of a key)."""
        done = self.accepted_keys()
        if not retry_rejected:
            done |= set(self.rejected_reasons())
        return done

    def write_record(self, record: GroundedRecord) -> Path:
        name = self.file_stem(record.key)
        write_records_pickle_folder([record], self.staging)
        target = self.annotations / f"{name}.pkl"
        os.replace(self.staging / f"{name}.pkl", target)
        (self.rejected / f"{name}.json").unlink(missing_ok=True)
        return target

    def write_rejection(self, rejection: Rejection) -> None:
        if rejection.retryable:
            return
        write_json_atomic(self.rejected / f"{self.file_stem(rejection.key)}.json", rejection.to_dict(), indent=None)

    def close(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
