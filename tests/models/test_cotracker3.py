"""CoTracker3 offline: the released checkpoint layout (check and load through the safe loader, a
wrong file named key by key), batching, and the predictor's conventions. Parity with the official
implementation is measured outside the project (docs/trackers.md)."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from models.cotracker3.convert_official import check_cotracker3, config_from_state, load_cotracker3
from models.cotracker3.modeling import CoTracker3Config, CoTracker3Offline, CoTracker3Predictor, fourier_features

ROOT = Path(__file__).resolve().parents[2]
TINY = CoTracker3Config(window_len=6, hidden_size=16, num_heads=2, time_depth=2, space_depth=1, num_virtual_tracks=3,
                        latent_dim=16, corr_hidden=12, corr_out=8, model_resolution=(32, 48))


def test_fourier_features_by_hand():
    x = torch.tensor([[0.5, -1.0, 0.25, 2.0]])
    out = fourier_features(x, 2)
    assert out.shape == (1, 4 + 16)
    assert out[0, :4].tolist() == x[0].tolist()
    # scale-major: [x*1 (4), x*2 (4)] then their sines, then cosines
    assert out[0, 4 + 5].item() == pytest.approx(torch.sin(torch.tensor(-2.0)).item(), abs=1e-6)
    assert out[0, 12 + 0].item() == pytest.approx(torch.cos(torch.tensor(0.5)).item(), abs=1e-6)


def test_checkpoint_check_load_and_a_wrong_file(tmp_path):
    torch.manual_seed(0)
    model = CoTracker3Offline(TINY)
    path = tmp_path / "tiny_offline.pth"
    torch.save({"model": {f"module.{k}": v for k, v in model.state_dict().items()}}, path)  # a DDP-style save
    report, cfg = check_cotracker3(path, CoTracker3Config(num_heads=2, model_resolution=(32, 48)))
    assert report.ok, report.table()
    assert cfg == TINY
    loaded = load_cotracker3(path, CoTracker3Config(num_heads=2, model_resolution=(32, 48)))
    for k, v in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v)
    assert config_from_state(model.state_dict()).window_len == 6
    state = model.state_dict()
    state.pop("corr_mlp.fc2.bias")
    state["extra.weight"] = torch.zeros(2)
    torch.save(state, tmp_path / "wrong.pth")
    run = subprocess.run([sys.executable, "-m", "command_line.grove", "convert-cotracker3", str(tmp_path / "wrong.pth"),
                          "--check"], capture_output=True,
                         text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 1
    assert "UNACCOUNTED  extra.weight" in run.stdout and "MISSING" in run.stdout and "corr_mlp.fc2.bias" in run.stdout


def test_batched_clips_equal_single_clips_and_query_points_are_kept():
    torch.manual_seed(1)
    model = CoTracker3Offline(TINY).eval()
    video = torch.rand(2, 5, 3, 32, 48) * 255
    queries = torch.tensor([[[0, 3.0, 4.0], [4, 30.0, 20.0]], [[2, 10.0, 10.0], [1, 47.0, 31.0]]])
    with torch.no_grad():
        coords, vis, conf = model(video, queries, iters=2)
        for i in range(2):
            c, v, f = model(video[i:i + 1], queries[i:i + 1], iters=2)
            torch.testing.assert_close(c, coords[i:i + 1], atol=1e-4, rtol=0)
            torch.testing.assert_close(v, vis[i:i + 1], atol=1e-5, rtol=0)
    assert coords.shape == (2, 5, 2, 2) and ((vis >= 0) & (vis <= 1)).all() and ((conf >= 0) & (conf <= 1)).all()
    tracks, visible = CoTracker3Predictor(model, iters=2)(torch.rand(1, 4, 3, 40, 60) * 255,
                                                          torch.tensor([[[2, 11.5, 7.0]]]))
    assert tracks.shape == (1, 4, 1, 2) and visible.dtype == torch.bool and bool(visible[0, 2, 0])
    assert tracks[0, 2, 0].tolist() == pytest.approx([11.5, 7.0], abs=1e-4)
