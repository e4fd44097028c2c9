"""longvideo.prefetch: a background thread, in order, errors where they happened, bounded, stoppable."""
import threading
import time

import pytest

from longvideo.prefetch import BackgroundIterable


class Counting:
    def __init__(self, n, fail_at=None):
        self.n, self.fail_at, self.made = n, fail_at, 0
        self.threads = set()

    def __iter__(self):
        for i in range(self.n):
            self.threads.add(threading.current_thread().name)
            if i == self.fail_at:
                raise KeyError(f"item {i}")
            self.made += 1
            yield i


def test_items_in_order_from_another_thread():
    source = Counting(50)
    assert list(BackgroundIterable(source, depth=3)) == list(range(50))
    assert source.threads == {"long-video-decoder"}
    assert list(BackgroundIterable(Counting(0))) == []


def test_an_error_comes_out_after_the_items_before_it():
    got = []
    with pytest.raises(KeyError, match="item 7"):
        for item in BackgroundIterable(Counting(20, fail_at=7), depth=2):
            got.append(item)
    assert got == list(range(7))


def test_the_producer_stays_at_most_depth_items_ahead():
    source = Counting(100)
    it = iter(BackgroundIterable(source, depth=4))
    for consumed in range(1, 6):
        assert next(it) == consumed - 1
        time.sleep(0.05)  # let the producer run ahead as far as it may
        # the queue holds depth items and one more may wait in put()
        assert source.made <= consumed + 4 + 1
    it.close()


def test_closing_early_stops_the_thread():
    before = {t.ident for t in threading.enumerate()}
    it = iter(BackgroundIterable(Counting(10**6), depth=2))
    next(it)
    it.close()
    extra = [t for t in threading.enumerate() if t.ident not in before and t.name == "long-video-decoder"]
    assert not any(t.is_alive() for t in extra)


def test_depth_must_be_positive():
    with pytest.raises(ValueError, match="depth"):
        BackgroundIterable([], depth=0)
