"""Clips waiting for the model, under a named policy for when the model falls behind.

- ``drop-oldest`` (live sources): at most ``capacity`` clips wait; a new clip arriving at a full
  queue pushes out the oldest one, which is counted as dropped. Latency stays bounded by the
  model's own time per clip, and memory by ``capacity`` clips, however long the stream runs.
- ``queue`` (replay of a file): nothing is dropped; the producer waits for room, so the source is
  read no faster than the model predicts (the network or the file holds the rest).
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Any

POLICIES = ("drop-oldest", "queue")


class ClipQueue:
    """A bounded hand-over of clips from the decoding thread to the model's."""

    def __init__(self, policy: str = "drop-oldest", capacity: int = 1):
        if policy not in POLICIES:
            raise ValueError(f"the skip policy must be one of {', '.join(POLICIES)}, got {policy!r}")
        if capacity < 1:
            raise ValueError(f"the queue holds at least one clip, got {capacity}")
        self.policy, self.capacity = policy, int(capacity)
        self.items: deque[Any] = deque()
        self.dropped: list[Any] = []  # the clips pushed out (drop-oldest), in order
        self.closed = False
        self._cond = threading.Condition()

    def put(self, item: Any) -> None:
        with self._cond:
            while self.policy == "queue" and len(self.items) >= self.capacity and not self.closed:
                self._cond.wait()
            if self.policy == "drop-oldest" and len(self.items) >= self.capacity:
                self.dropped.append(self.items.popleft())
            self.items.append(item)
            self._cond.notify_all()

    def close(self) -> None:
        """No more clips: :meth:`get` returns None once the queue is empty."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def get(self) -> Any | None:
        """The oldest waiting clip; waits for one; None when closed and empty."""
        with self._cond:
            while not self.items and not self.closed:
                self._cond.wait()
            item = self.items.popleft() if self.items else None
            self._cond.notify_all()
            return item
