"""The offline evaluation reads in few files: a reader of ``evaluate_files`` follows its calls
through at most 8 project files (traced on a small set, project protocol, grounding metrics)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from formats.records import write_records_json
from metrics.evaluator.evaluation import evaluate_files
from tests.fixtures.metric_records import random_dataset
from tests.metrics.test_evaluate import valid_predictions

ROOT = Path(__file__).resolve().parents[2]


def visited_files(fn) -> list[str]:
    """Project files whose functions ``fn()`` calls, in first-visit order."""
    seen: dict[str, None] = {}

    def tracer(frame, event, arg):
        path = Path(frame.f_code.co_filename)
        if event == "call" and ROOT in path.parents and not {".venv", "tests"} & set(path.relative_to(ROOT).parts):
            seen.setdefault(path.relative_to(ROOT).as_posix())

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return list(seen)


def test_evaluate_files_visits_at_most_eleven_project_files(tmp_path):
    records, preds = random_dataset(seed=3, n=6)
    gt = write_records_json(records, tmp_path / "gt.json")
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps(valid_predictions(preds)))
    run = lambda: evaluate_files(gt, pred, text_encoder="exact", caption_metrics=(), capture=False)  # noqa: E731
    run()  # imports happen outside the trace
    files = visited_files(run)
    assert "metrics/functional/grounding.py" in files and files[0] == "metrics/evaluator/evaluation.py"
    assert len(files) <= 11, files
