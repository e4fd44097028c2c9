"""A weight stored as another kind of number than the model's is refused, naming the key."""
from core.weights.dtypes import WeightDtypeError, refuse_dtype_mismatch
from core.weights.pretrained_folder import load_into, load_weights, save_weights

import pytest
import torch


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))


def test_an_int_weight_in_an_exported_folder_is_refused_naming_the_key(tmp_path):
    state = {k: v.clone() for k, v in _model().state_dict().items()}
    state["0.weight"] = (state["0.weight"] * 100).to(torch.int32)
    save_weights(state, tmp_path)
    model = _model()
    before = model.state_dict()["0.weight"].clone()
    with pytest.raises(WeightDtypeError, match=rf"{tmp_path}: 1 weight\(s\).*0.weight: stored torch.int32, "
                                               r"model torch.float32"):
        load_into(model, load_weights(tmp_path), str(tmp_path))
    assert torch.equal(model.state_dict()["0.weight"], before)  # nothing was loaded


def test_other_precision_of_the_same_kind_loads(tmp_path):
    source = _model()
    state = {k: (v.half() if v.is_floating_point() else v) for k, v in source.state_dict().items()}
    save_weights(state, tmp_path)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    load_into(model, load_weights(tmp_path), str(tmp_path))
    assert torch.equal(model[0].weight, source[0].weight.half().float())


def test_each_kind_is_told_apart():
    expected = {"f": torch.zeros(2), "i": torch.zeros(2, dtype=torch.int64), "b": torch.zeros(2, dtype=torch.bool)}
    refuse_dtype_mismatch(expected, {"f": torch.zeros(2, dtype=torch.bfloat16),
                                     "i": torch.zeros(2, dtype=torch.int32), "b": torch.ones(2, dtype=torch.bool)}, "x")
    for key, stored in (("f", torch.zeros(2, dtype=torch.int64)), ("i", torch.zeros(2)),
                        ("b", torch.zeros(2, dtype=torch.uint8)), ("f", torch.zeros(2, dtype=torch.complex64))):
        with pytest.raises(WeightDtypeError, match=rf"x: 1 weight\(s\).*{key}: stored {stored.dtype}"):
            refuse_dtype_mismatch(expected, {key: stored}, "x")
