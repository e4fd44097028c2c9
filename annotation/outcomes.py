"""What can happen to a clip besides being annotated: rejected by a stage (with the reason)."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Rejection:
    """A clip no record is written for. ``retryable``: the backend failed (not the clip), so a re-run redoes it."""

    key: str
    stage: str
    reason: str
    retryable: bool = False

    def to_dict(self) -> dict:
        return asdict(self)
