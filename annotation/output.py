"""The output folder: records, rejections, and what a re-run may skip.

``OUT/annotations/{video_id}_{clip_id}.pkl`` holds one record per accepted clip in the
HowToGround1M per-key layout (written by :func:`datamodules.records.write_records_pickle_folder`
into a staging folder, then renamed into place, so an interrupted run never leaves a partial
record). ``OUT/rejected/{key}.json`` holds each rejected clip's reason. A re-run skips clips
with either file; rejections caused by an unavailable backend are not stored, so they are redone.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from annotation.outcomes import Rejection
from datamodules.records import GroundedRecord, write_records_pickle_folder


class OutputFolder:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.annotations = self.root / "annotations"
        self.rejected = self.root / "rejected"
        self.staging = self.root / ".staging"
        for folder in (self.annotations, self.rejected, self.staging):
            folder.mkdir(parents=True, exist_ok=True)

    def accepted_keys(self) -> set[str]:
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
        done = self.accepted_keys()
        if not retry_rejected:
            done |= set(self.rejected_reasons())
        return done

    def write_record(self, record: GroundedRecord) -> Path:
        write_records_pickle_folder([record], self.staging)
        target = self.annotations / f"{record.key}.pkl"
        os.replace(self.staging / f"{record.key}.pkl", target)
        (self.rejected / f"{record.key}.json").unlink(missing_ok=True)
        return target

    def write_rejection(self, rejection: Rejection) -> None:
        if rejection.retryable:
            return
        tmp = self.staging / f"{rejection.key}.json"
        tmp.write_text(json.dumps(rejection.to_dict()))
        os.replace(tmp, self.rejected / f"{rejection.key}.json")

    def close(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
