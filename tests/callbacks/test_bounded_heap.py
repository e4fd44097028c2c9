"""callbacks.bounded_heap: thresholds set at setup, the heap trimmed every ``trim_every`` batches."""
import pytest

import callbacks.bounded_heap as module
from callbacks.bounded_heap import BoundedHeap


@pytest.fixture
def calls(monkeypatch):
    seen = {"bound": [], "trim": 0}

    def bound(**kwargs):
        seen["bound"].append(kwargs)
        return True

    def trim():
        seen["trim"] += 1
        return True

    monkeypatch.setattr(module, "bound_heap", bound)
    monkeypatch.setattr(module, "release_heap", trim)
    return seen


def test_settings_at_setup_and_a_trim_every_n_batches(calls):
    callback = BoundedHeap(mmap_threshold=1 << 20, trim_threshold=2 << 20, arena_max=3, trim_every=4)
    callback.setup(None, None, "predict")
    assert calls["bound"] == [dict(mmap_threshold=1 << 20, trim_threshold=2 << 20, arena_max=3)]
    for i in range(10):
        callback.on_predict_batch_end(None, None, None, None, i)
    assert calls["trim"] == 2 == callback.trims   # after batches 4 and 8


def test_no_trim_when_off_or_where_the_settings_could_not_be_made(calls, monkeypatch):
    callback = BoundedHeap(trim_every=0)
    callback.setup(None, None, "test")
    for i in range(8):
        callback.on_test_batch_end(None, None, None, None, i)
    monkeypatch.setattr(module, "bound_heap", lambda **kwargs: False)   # not glibc
    other = BoundedHeap(trim_every=1)
    other.setup(None, None, "validate")
    other.on_validation_batch_end(None, None, None, None, 0)
    assert calls["trim"] == 0


def test_negative_trim_every_is_refused():
    with pytest.raises(ValueError, match="trim_every"):
        BoundedHeap(trim_every=-1)
