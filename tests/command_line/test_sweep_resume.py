"""grove sweep --resume reuses a point only when its saved result came from the same inputs."""
import sweeps.runner as sweep
from sweeps.points import SweepPoint
from sweeps.runner import run_sweep


def test_resume_reuses_only_points_with_identical_inputs_that_succeeded(tmp_path, monkeypatch):
    calls = []

    def fake_point(point, base_args, out, extra, thresholds, text_encoder, cli_main):
        calls.append((point.name, list(base_args), list(point.args)))
        if "--fail" in point.args:
            raise RuntimeError("this point fails")
        return {"name": point.name, "args": point.args, "metrics": {"AP50": 0.5}, "threshold_sweep": None}

    monkeypatch.setattr(sweep, "run_point", fake_point)
    points = [SweepPoint("a", ["--x=1"]), SweepPoint("b", ["--fail"])]
    kwargs = dict(thresholds=(), text_encoder="exact", resume=True)
    run_sweep(["--config", "one.yaml"], points, tmp_path, **kwargs)
    assert [c[0] for c in calls] == ["a", "b"]
    calls.clear()
    run_sweep(["--config", "one.yaml"], points, tmp_path, **kwargs)  # same inputs: a is reused, b failed before
    assert [c[0] for c in calls] == ["b"]
    calls.clear()
    run_sweep(["--config", "two.yaml"], points, tmp_path, **kwargs)  # another base config: nothing is reused
    assert [c[0] for c in calls] == ["a", "b"]
    calls.clear()
    run_sweep(["--config", "two.yaml"], [SweepPoint("a", ["--x=2"])], tmp_path, **kwargs)  # same name, other args
    assert calls == [("a", ["--config", "two.yaml"], ["--x=2"])]
    assert not (tmp_path / ".lock").exists()
