"""Two runs never share a run folder silently: the second is refused while the first writes."""
from core.folder_lock import FolderInUseError

import json
import multiprocessing
import time

import lightning as L
import pytest
import torch

from callbacks.prediction_writer import PredictionWriter
from longvideo.timeline_writer import LongVideoTimeline


class _Tiny(L.LightningModule):
    def __init__(self, tag: str):
        super().__init__()
        self.tag = tag
        self.layer = torch.nn.Linear(1, 1)

    def predict_step(self, batch, batch_idx):
        time.sleep(0.5)  # long enough for the runs to overlap
        return {"predictions": {f"{self.tag}_{batch_idx}": {"caption": self.tag, "frames": []}}}


def _predict(folder, tag, barrier, results):
    try:
        barrier.wait()
        trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
                            callbacks=[PredictionWriter(output_dir=str(folder)),
                                       LongVideoTimeline(output_dir=str(folder), render=False)],
                            default_root_dir=str(folder))
        trainer.predict(_Tiny(tag), torch.utils.data.DataLoader(torch.zeros(3, 1), batch_size=1))
        results.put(("ok", tag))
    except FolderInUseError as err:
        results.put(("refused", str(err)))
    except BaseException as err:  # noqa: BLE001 - reported to the parent
        results.put(("error", f"{type(err).__name__}: {err}"))


def test_two_predict_runs_into_one_folder_one_is_refused_naming_it(tmp_path):
    context = multiprocessing.get_context("fork")
    for round_ in range(3):
        folder = tmp_path / f"run{round_}"
        barrier, results = context.Barrier(2), context.Queue()
        workers = [context.Process(target=_predict, args=(folder, tag, barrier, results)) for tag in ("a", "b")]
        for worker in workers:
            worker.start()
        outcomes = sorted(results.get(timeout=120) for _ in workers)
        for worker in workers:
            worker.join(timeout=60)
        kinds = [kind for kind, _ in outcomes]
        assert kinds == ["ok", "refused"], outcomes
        winner, message = outcomes[0][1], outcomes[1][1]
        assert f"{folder} is in use by another run" in message and "cli.py predict" in message
        written = json.loads((folder / "predictions_predict.json").read_text())
        assert sorted(written) == [f"{winner}_{i}" for i in range(3)]  # one run's file, whole
        timeline = json.loads((folder / "timeline.json").read_text())
        assert timeline["videos"] == [] and not (folder / ".lock").exists()


def test_a_link_in_the_run_folder_is_not_written_through(tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "predictions_predict.json").symlink_to(outside)
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[PredictionWriter(output_dir=str(folder))], default_root_dir=str(folder))
    with pytest.raises(ValueError, match=r"predictions_predict.json is a symbolic link"):
        trainer.predict(_Tiny("a"), torch.utils.data.DataLoader(torch.zeros(1, 1), batch_size=1))
    assert outside.read_text() == "{}" and not (folder / ".lock").exists()
