"""The demo under shutdown: the prediction in flight ends at its next batch, no new one starts."""
import threading
import time
from dataclasses import replace

import pytest

from tests.webdemo.tiny_model import DEMO_CONFIG, TINY_MODEL_ARGS
from webdemo.predictor import DemoPredictor, ServerStopping
from webdemo.workspace import Workspace


def test_stop_ends_the_prediction_in_flight_and_refuses_new_ones(tiny_checkpoint, tiny_synthetic_root, tmp_path):
    clip = sorted((tiny_synthetic_root / "videos").glob("synthtest*.mp4"))[0]
    predictor = DemoPredictor([DEMO_CONFIG], tiny_checkpoint, clip,
                              [*TINY_MODEL_ARGS, "--data.init_args.eval_batch_size=1"])
    # short windows: several batches, so the prediction is stopped between two of them
    settings = replace(predictor.defaults, clip_seconds=0.4, stride_seconds=0.4)
    first_batch, outcome = threading.Event(), {}

    def progress(done, total, what):
        first_batch.set()
        assert stopped.wait(60)  # hold the prediction here until stop() was called

    stopped = threading.Event()

    def run():
        with Workspace(parent=tmp_path) as workspace:
            try:
                outcome["result"] = predictor.predict(clip, settings, workspace.new_run(), progress=progress)
            except Exception as err:  # noqa: BLE001
                outcome["error"] = err

    thread = threading.Thread(target=run)
    thread.start()
    assert first_batch.wait(120)
    waiter = threading.Thread(target=lambda: outcome.setdefault("stopped", predictor.stop(timeout=60)))
    waiter.start()
    while not predictor._stopping.is_set():  # release the first batch once stop() has begun
        time.sleep(0.01)
    stopped.set()
    waiter.join(90)
    thread.join(90)
    assert outcome.get("stopped") is True and isinstance(outcome.get("error"), ServerStopping), outcome
    with Workspace(parent=tmp_path) as workspace, pytest.raises(ServerStopping, match="no new predictions"):
        predictor.predict(clip, settings, workspace.new_run())
