"""GroundedCaptionMetrics: de-duplication by key and DDP (gloo, 2 processes) parity with one process."""
import os
import socket

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from metrics.grounded_caption_metric import GroundedCaptionMetrics
from tests.fixtures.metric_records import random_dataset


def _metric(records):
    return GroundedCaptionMetrics(references=records, text_encoder="exact", caption_metrics=(), capture=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, keys_per_rank, queue, unknown_key=None):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        records, preds = random_dataset(seed=7, n=9)
        metric = _metric(records)
        calls = []
        evaluate = metric.evaluate
        metric.evaluate = lambda: calls.append(rank) or evaluate()
        for key in keys_per_rank[rank]:  # one update per "batch" of one clip
            metric.update({key: preds[key]})
        if unknown_key is not None and rank == 1:  # a prediction no reference has, seen by rank 1 only
            metric.update({unknown_key: next(iter(preds.values()))})
        try:
            result = metric.compute()
        except KeyError as err:
            result = f"KeyError: {err}"
        queue.put((rank, (result, len(calls))))
    finally:
        dist.destroy_process_group()


def _run_two_ranks(shards, unknown_key=None):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, 2, port, shards, queue, unknown_key)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


def test_single_process_deduplicates_repeated_clips():
    records, preds = random_dataset(seed=7, n=9)
    once, twice = _metric(records), _metric(records)
    once.update(preds)
    twice.update(preds)
    twice.update({k: preds[k] for k in list(preds)[:3]})  # sampler padding repeats clips
    assert once.compute() == twice.compute()


def test_prediction_without_reference_is_refused_by_name():
    records, preds = random_dataset(seed=8, n=4)
    metric = _metric(records)
    metric.update({**preds, "clip_from_another_split": next(iter(preds.values()))})
    with pytest.raises(KeyError, match="1 predicted clip.*clip_from_another_split"):
        metric.compute()
    assert metric.checked_predictions({*preds, "clip_from_another_split"}).keys() == {*preds, "clip_from_another_split"}


@pytest.mark.slow
def test_two_process_gloo_equals_one_process():
    records, preds = random_dataset(seed=7, n=9)
    single = _metric(records)
    single.update(preds)
    expected = single.compute()
    keys = sorted(preds)
    # DistributedSampler-style split of 9 clips over 2 ranks: 5 each, the 10th repeats clip 0
    padded = keys + keys[:1]
    shards = [padded[0::2], padded[1::2]]
    results = _run_two_ranks(shards)
    for rank in range(2):
        values, _ = results[rank]
        assert values.keys() == expected.keys()
        for k, v in expected.items():
            assert values[k] == pytest.approx(v, abs=1e-9), k
    # the gathered predictions are evaluated once, on rank 0, and broadcast
    assert [results[rank][1] for rank in range(2)] == [1, 0]


def test_an_evaluation_error_on_rank_zero_reaches_every_rank():
    keys = sorted(random_dataset(seed=7, n=9)[1])
    results = _run_two_ranks([keys[0::2], keys[1::2]], unknown_key="not-a-clip")
    for rank in range(2):
        message, _ = results[rank]
        assert isinstance(message, str) and "no reference record" in message and "not-a-clip" in message
