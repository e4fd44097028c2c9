"""The output folder: records, rejections, and what a re-run may skip.

``OUT/annotations/{video_id}_{clip_id}.pkl`` holds one record per accepted clip in the
HowToGround1M per-key layout (written by :func:`formats.records.write_records_pickle_folder`,
atomically: an interrupted run never leaves a partial record, at most a hidden ``.*.partial``
file that no reader takes for a record). ``OUT/rejected/{key}.json`` holds each rejected clip's
reason. A re-run skips clips with either file; rejections caused by an unavailable backend are
not stored, so they are redone.

File names are the keys through :func:`core.safe_names.safe_file_name`: the key itself for
ordinary ids, a readable name plus a hash for any other, never a path outside ``OUT``.
"""
from __future__ import annotations

from core.json_file import read_json
from core.output_files import write_json_atomic
from core.safe_names import safe_file_name

from pathlib import Path

from annotation.outcomes import Rejection
from formats.records import GroundedRecord, write_records_pickle_folder


class OutputFolder:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.annotations = self.root / "annotations"
        self.rejected = self.root / "rejected"
        for folder in (self.annotations, self.rejected):
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
                out[path.stem] = read_json(path)
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
        write_records_pickle_folder([record], self.annotations)
        (self.rejected / f"{name}.json").unlink(missing_ok=True)
        return self.annotations / f"{name}.pkl"

    def write_rejection(self, rejection: Rejection) -> None:
        if rejection.retryable:
            return
        write_json_atomic(self.rejected / f"{self.file_stem(rejection.key)}.json", rejection.to_dict(), indent=None)

    def close(self) -> None:
        """Remove what killed runs left half-written (their hidden ``.*.partial`` files; the run holds
        the folder's lock, so none is another run's)."""
        for debris in self.annotations.glob(".*.partial"):
            debris.unlink(missing_ok=True)
