"""Runs an iterable in a background thread of the model's process, a few items ahead.

Long-video predict decodes and preprocesses clips while the model runs on the previous ones. A
forked DataLoader worker would do that in a copy of the model's process: every page either
process writes after the fork (the model's allocations, the garbage collector's bookkeeping) is
copied, so the pair grows with the video's length until the worker holds a second copy of the
model process. A thread shares the one process instead, and still overlaps: PyAV decodes and
torch resizes with the GIL released. At most ``depth`` items wait in the queue.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Iterable, Iterator

from torch.utils.data import IterableDataset

_DONE = object()


class _Raised:
    def __init__(self, error: BaseException):
        self.error = error


class BackgroundIterable(IterableDataset):
    """``source`` iterated in a daemon thread; items, and an exception it raises, come out in order.

    Closing the consumer's iterator early (``break``, an error in the model) stops the thread at its
    next item.
    """

    def __init__(self, source: Iterable[Any], depth: int = 2, name: str = "long-video-decoder"):
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self.source = source
        self.depth = int(depth)
        self.name = name

    def __iter__(self) -> Iterator[Any]:
        items: queue.Queue = queue.Queue(maxsize=self.depth)
        stop = threading.Event()

        def put(item) -> bool:
            while not stop.is_set():
                try:
                    items.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def produce() -> None:
            try:
                for item in self.source:
                    if not put(item):
                        return
                put(_DONE)
            except BaseException as err:  # handed to the consumer, raised there
                put(_Raised(err))

        thread = threading.Thread(target=produce, name=self.name, daemon=True)
        thread.start()
        try:
            while True:
                item = items.get()
                if item is _DONE:
                    return
                if isinstance(item, _Raised):
                    raise item.error
                yield item
        finally:
            stop.set()
            thread.join(timeout=5.0)


__all__ = ["BackgroundIterable"]
