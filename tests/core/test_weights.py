"""core.weights: every weight file loaded on a user's behalf gives tensors or a clear error, never runs code."""
from __future__ import annotations

import core  # noqa: F401
from core.weights import WeightFileError, load_state_dict_file

import io
import pickle
import zipfile

import pytest
import torch

from callbacks.init_from_checkpoint import InitFromCheckpoint


class _Payload:
    """Unpickling this creates ``marker``: the stand-in for a downloaded file's malicious code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def _malicious_checkpoint(path, marker):
    torch.save({"state_dict": {"w": torch.zeros(2)}, "extra": _Payload(marker)}, path)
    return path


def test_a_crafted_pickle_is_refused_without_running_its_payload(tmp_path):
    marker = tmp_path / "payload_ran"
    path = _malicious_checkpoint(tmp_path / "model.ckpt", marker)
    with pytest.raises(WeightFileError, match=r"model\.ckpt.*refused"):
        load_state_dict_file(path)
    assert not marker.exists()
    torch.load(path, weights_only=False)  # the stock unpickler does run it: the payload is real
    assert marker.exists()


def test_init_from_checkpoint_refuses_a_crafted_pickle(tmp_path):
    marker = tmp_path / "payload_ran"
    path = _malicious_checkpoint(tmp_path / "pretrained.ckpt", marker)
    callback = InitFromCheckpoint(str(path))
    with pytest.raises(WeightFileError, match=r"InitFromCheckpoint.*pretrained\.ckpt"):
        callback.setup(trainer=None, pl_module=torch.nn.Linear(2, 1), stage="fit")
    assert not marker.exists()


def test_plain_and_lightning_state_dicts_and_safetensors_load(tmp_path):
    from safetensors.torch import save_file

    state = {"a.weight": torch.randn(3, 2), "b": torch.arange(4)}
    torch.save(state, tmp_path / "plain.pth")
    torch.save({"state_dict": state, "epoch": 3, "hyper_parameters": {"lr": 0.1}}, tmp_path / "run.ckpt")
    save_file(state, str(tmp_path / "w.safetensors"))
    for name in ("plain.pth", "run.ckpt", "w.safetensors"):
        loaded = load_state_dict_file(tmp_path / name)
        assert loaded.keys() == state.keys() and all(torch.equal(loaded[k], state[k]) for k in state)


def test_files_that_are_not_state_dicts_are_named(tmp_path):
    torch.save([torch.zeros(1)], tmp_path / "list.pt")
    with pytest.raises(WeightFileError, match=r"model\.x: .*list\.pt: holds a list"):
        load_state_dict_file(tmp_path / "list.pt", "model.x")
    torch.save({"w": torch.zeros(1), "step": 3}, tmp_path / "mixed.pt")
    with pytest.raises(WeightFileError, match=r"mixed\.pt: not a state dict of tensors.*step"):
        load_state_dict_file(tmp_path / "mixed.pt")
    (tmp_path / "notes.txt").write_text("not weights")
    with pytest.raises(WeightFileError, match=r"notes\.txt"):
        load_state_dict_file(tmp_path / "notes.txt")
    with pytest.raises(FileNotFoundError, match=r"absent\.pt"):
        load_state_dict_file(tmp_path / "absent.pt")


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 4, 3)
        self.ln = torch.nn.LayerNorm(4)
        self.register_buffer("mask", torch.randn(2, 2))
        self.scale = torch.nn.Parameter(torch.randn(3).half())

    def forward(self, x):
        return self.ln(self.conv1(x).mean((2, 3)))


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.visual = _Block()
        self.head = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
        self.logit_scale = torch.nn.Parameter(torch.tensor(2.0))

    def forward(self, x):
        return self.head(self.visual(x)) * self.logit_scale


@pytest.mark.parametrize("how", ["script", "trace"])
def test_torchscript_archives_are_read_without_running_them(tmp_path, monkeypatch, how):
    torch.manual_seed(0)
    model = _Model()
    archive = torch.jit.script(model) if how == "script" else torch.jit.trace(model, torch.randn(1, 3, 8, 8))
    archive.save(str(tmp_path / "clip.pt"))
    expected = torch.jit.load(str(tmp_path / "clip.pt")).state_dict()

    def no_jit(*args, **kwargs):
        raise AssertionError("the archive was executed")

    monkeypatch.setattr(torch.jit, "load", no_jit)
    loaded = load_state_dict_file(tmp_path / "clip.pt")
    assert loaded.keys() == expected.keys()
    assert all(torch.equal(loaded[k], expected[k]) and loaded[k].dtype == expected[k].dtype for k in expected)


def test_a_torchscript_archive_with_a_crafted_data_pkl_is_refused(tmp_path):
    marker = tmp_path / "payload_ran"
    buffer = io.BytesIO()
    pickle.dump(_Payload(marker), buffer, protocol=2)
    with zipfile.ZipFile(tmp_path / "evil.pt", "w") as archive:
        archive.writestr("evil/data.pkl", buffer.getvalue())
        archive.writestr("evil/code/__torch__/m.py", "")
    with pytest.raises(WeightFileError, match=r"evil\.pt.*data\.pkl refers to .*open.*refused"):
        load_state_dict_file(tmp_path / "evil.pt")
    assert not marker.exists()


def test_tower_checkpoints_load_through_the_safe_loader(tmp_path):
    from models.grove.configuration import load_weights

    marker = tmp_path / "payload_ran"
    path = _malicious_checkpoint(tmp_path / "sam.pth", marker)
    with pytest.raises(WeightFileError, match=r"model\.grounding_encoder\.checkpoint: .*sam\.pth"):
        load_weights(path, "model.grounding_encoder.checkpoint")
    assert not marker.exists()
    torch.save({"module.visual.w": torch.ones(2)}, tmp_path / "wrapped.pth")
    assert list(load_weights(tmp_path / "wrapped.pth", "k")) == ["visual.w"]  # DataParallel prefix removed


def test_nan_weights_are_refused_and_infinities_named(tmp_path, caplog):
    good = {"layer.weight": torch.randn(3, 4), "layer.bias": torch.zeros(3), "steps": torch.arange(3)}
    torch.save(good, tmp_path / "good.pt")
    assert load_state_dict_file(tmp_path / "good.pt").keys() == good.keys()
    torch.save({**good, "layer.weight": torch.full((3, 4), float("nan"))}, tmp_path / "nan.pt")
    with pytest.raises(WeightFileError, match=r"nan.pt: 1 tensor\(s\) hold NaN values, e.g. 'layer.weight' "
                                              r"\(12 of 12 values\)"):
        load_state_dict_file(tmp_path / "nan.pt")
    from safetensors.torch import save_file

    bias = torch.zeros(3)
    bias[1] = float("inf")
    save_file({**good, "layer.bias": bias, "attn.attn_mask": torch.full((2, 2), float("-inf"))},
              str(tmp_path / "inf.safetensors"))
    with caplog.at_level("WARNING", logger="core.weights"):
        state = load_state_dict_file(tmp_path / "inf.safetensors", key="model.checkpoint")
    assert torch.isinf(state["layer.bias"]).sum() == 1
    (message,) = [r.getMessage() for r in caplog.records]
    assert "model.checkpoint: " in message and "'layer.bias' (1 of 3 values)" in message
    assert "attn_mask" not in message  # -inf is how attention masks are written


def test_safetensors_headers_read_as_meta_tensors_naming_bad_files(tmp_path):
    from core.weights import read_safetensors_shapes

    from safetensors.torch import save_file

    tensors = {"a": torch.zeros(2, 3, dtype=torch.bfloat16), "q": torch.zeros(4, dtype=torch.int8),
               "m": torch.zeros(1, dtype=torch.bool)}
    save_file(tensors, str(tmp_path / "w.safetensors"))
    shapes = read_safetensors_shapes(tmp_path / "w.safetensors")
    assert {k: (tuple(v.shape), v.dtype, v.is_meta) for k, v in shapes.items()} == {
        k: (tuple(v.shape), v.dtype, True) for k, v in tensors.items()}
    data = (tmp_path / "w.safetensors").read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[:len(data) - 4])
    with pytest.raises(WeightFileError, match="cut.safetensors: not a readable safetensors file"):
        read_safetensors_shapes(tmp_path / "cut.safetensors")
