"""The one loader for weight files the project reads on a user's behalf (pre-trained towers,
converted official weights, fine-tuning init checkpoints, Hugging Face folders with or without a
shard index): tensors only, no code run.

``torch.load`` with the stock unpickler runs whatever a crafted file asks for; here every pickle
is read with ``weights_only=True`` and TorchScript archives (OpenAI's CLIP releases) are never
executed: their ``data.pkl`` is read by a restricted unpickler that rebuilds tensors and records
the scripted modules' attributes without importing or running any of their code.

Weights that hold NaN are refused, naming the tensors (a file like that predicts nothing
meaningful and would otherwise convert and run without a word); infinities are named in a
warning, except in attention masks, where ``-inf`` is how a masked position is written.

Lightning's own ``--ckpt_path`` resume is outside this loader: it restores a run's full training
state (optimizer, loops, callbacks), which needs the stock unpickler. Resume only from checkpoints
you wrote yourself.
"""
from __future__ import annotations

import json
import logging
import pickle
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import torch

__all__ = ["WeightFileError", "load_state_dict_file", "non_finite_tensors", "read_safetensors_shapes",
           "read_torchscript_tensors", "read_weights"]

log = logging.getLogger(__name__)
_SCAN_CHUNK = 1 << 24  # elements checked at a time: bounds the temporary of the finiteness scan


class WeightFileError(ValueError):
    """A weight file that cannot be read as a state dict of tensors."""


def _named(key: str | None, path: Path) -> str:
    return f"{key}: {path}" if key else str(path)


def _is_torchscript_archive(path: Path) -> bool:
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    return any(n.split("/", 1)[-1].startswith("code/") for n in names) and any(n.endswith("/data.pkl") for n in names)


def load_state_dict_file(path: str | Path, key: str | None = None) -> dict[str, torch.Tensor]:
    """A ``{name: tensor}`` state dict from a ``.safetensors`` file, a ``torch.save`` file (memory-mapped
    when possible; a Lightning checkpoint's ``state_dict`` is taken) or a TorchScript archive.

    ``key`` names the config entry in error messages. Raises :class:`WeightFileError` naming the file
    when it holds anything but tensors (a pickle that would need code to load is refused, not run).
    """
    path = Path(path)
    where = _named(key, path)
    if not path.is_file():
        raise FileNotFoundError(f"{where}: no such weight file")
    state = _read_tensors(path, key, where)
    _refuse_non_finite(state, where)
    return state


def _read_tensors(path: Path, key: str | None, where: str) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            return load_file(str(path), device="cpu")
        except Exception as err:  # noqa: BLE001  (safetensors raises its own error types)
            raise WeightFileError(f"{where}: not a readable safetensors file ({err})") from err
    if _is_torchscript_archive(path):
        obj = read_torchscript_tensors(path, key)
    else:
        obj = _torch_load_weights_only(path, where)
    for nested in ("state_dict", "model"):  # Lightning checkpoints; ViCLIP's release keeps the model under "model"
        if isinstance(obj, dict) and isinstance(obj.get(nested), dict):
            obj = obj[nested]
            break
    if not isinstance(obj, dict):
        raise WeightFileError(f"{where}: holds a {type(obj).__name__}, not a state dict of tensors")
    bad = [k for k, v in obj.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if bad:
        raise WeightFileError(f"{where}: not a state dict of tensors (entries {bad[:3]} are not named tensors)")
    return obj


def non_finite_tensors(state: dict[str, torch.Tensor]) -> dict[str, tuple[int, int, int]]:
    """``{name: (nan_count, inf_count, numel)}`` of the floating-point tensors holding NaN or inf
    (meta tensors are skipped). Scanned in chunks, so the check never doubles a large tensor."""
    out = {}
    for name, tensor in state.items():
        if tensor.is_meta or not (tensor.is_floating_point() or tensor.is_complex()) or tensor.numel() == 0:
            continue
        flat = tensor.reshape(-1)
        nan = inf = 0
        for start in range(0, flat.numel(), _SCAN_CHUNK):
            chunk = flat[start:start + _SCAN_CHUNK]
            bad = ~torch.isfinite(chunk)
            if bad.any():
                nans = int(torch.isnan(chunk).sum())
                nan, inf = nan + nans, inf + int(bad.sum()) - nans
        if nan or inf:
            out[name] = (nan, inf, flat.numel())
    return out


def _refuse_non_finite(state: dict[str, torch.Tensor], where: str) -> None:
    found = non_finite_tensors(state)
    with_nan = {k: v for k, v in found.items() if v[0]}
    if with_nan:
        shown = ", ".join(f"'{k}' ({n} of {total} values)" for k, (n, _, total) in list(with_nan.items())[:5])
        raise WeightFileError(f"{where}: {len(with_nan)} tensor(s) hold NaN values, e.g. {shown}; refused (a model "
                              "with such weights predicts nothing meaningful): the file is damaged or was saved "
                              "from a diverged run")
    with_inf = {k: v for k, v in found.items() if "mask" not in k.rsplit(".", 1)[-1]}
    if with_inf:
        shown = ", ".join(f"'{k}' ({n} of {total} values)" for k, (_, n, total) in list(with_inf.items())[:5])
        log.warning("%s: %d tensor(s) hold infinite values, e.g. %s; check the file before trusting its outputs",
                    where, len(with_inf), shown)


_SAFETENSORS_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool, "F8_E4M3": getattr(torch, "float8_e4m3fn", None),
    "F8_E5M2": getattr(torch, "float8_e5m2", None),
}


def read_safetensors_shapes(path: str | Path, key: str | None = None) -> dict[str, torch.Tensor]:
    """Meta tensors with the names, shapes and dtypes of a ``.safetensors`` file's header (no data read).

    Errors name the file; a dtype torch has no type for is a :class:`WeightFileError` naming the tensor.
    """
    from safetensors import safe_open

    path = Path(path)
    where = _named(key, path)
    try:
        with safe_open(str(path), framework="pt") as handle:
            out = {}
            for name in handle.keys():
                view = handle.get_slice(name)
                dtype = _SAFETENSORS_DTYPES.get(view.get_dtype())
                if dtype is None:
                    raise WeightFileError(f"{where}: tensor '{name}' has dtype {view.get_dtype()}, which torch "
                                          "cannot hold")
                out[name] = torch.empty(view.get_shape(), dtype=dtype, device="meta")
            return out
    except WeightFileError:
        raise
    except Exception as err:  # noqa: BLE001  (safetensors raises its own error types)
        raise WeightFileError(f"{where}: not a readable safetensors file ({err})") from err


def _torch_load_weights_only(path: Path, where: str) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError as err:
        raise WeightFileError(
            f"{where}: not a plain weight file; loading it would need objects beyond tensors, which could "
            f"run code, so it is refused ({str(err).splitlines()[0]}). Save the weights alone "
            "(torch.save(model.state_dict(), path)) or as .safetensors") from err
    except RuntimeError:
        pass  # legacy (non-zip) files cannot be memory-mapped
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise WeightFileError(f"{where}: not a plain weight file; loading it would need objects beyond tensors, "
                              f"which could run code, so it is refused ({str(err).splitlines()[0]})") from err
    except Exception as err:  # noqa: BLE001  (truncated files, other formats)
        raise WeightFileError(f"{where}: not a weight file torch can read ({type(err).__name__}: {err})") from err


# ----------------------------------------------------------------------------- Hugging Face folders

def read_weights(path: str | Path, shapes_only: bool = False) -> dict[str, torch.Tensor]:
    """A state dict from a weight file (:func:`load_state_dict_file`) or a Hugging Face folder.

    ``.bin`` files are read with ``weights_only=True`` and memory-mapped, so a tensor's data is
    read from disk only when used; meta tensors load as they are. With ``shapes_only``,
    safetensors give meta tensors from their headers, without reading any data. A folder with a
    shard index (``*.index.json``) is read shard by shard as the index lists them, and every key
    the index names must be in its shard.
    """
    path = Path(path)
    if path.is_dir():
        index = sorted(path.glob("model.safetensors.index.json")) or sorted(path.glob("pytorch_model*.index.json"))
        if index:
            return _read_indexed(index[0], shapes_only)
        files = sorted(path.glob("*.safetensors")) or sorted(path.glob("pytorch_model*.bin"))
        if not files:
            raise FileNotFoundError(
                f"{path}: a Hugging Face folder must hold *.safetensors or pytorch_model*.bin files")
        state: dict[str, torch.Tensor] = {}
        for file in files:
            state.update(_read_file(file, shapes_only))
        return state
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such checkpoint file or folder")
    return _read_file(path, shapes_only)


def _read_indexed(index: Path, shapes_only: bool) -> dict[str, torch.Tensor]:
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{index}: not a shard index (needs a 'weight_map' of key -> file): {err}") from None
    state: dict[str, torch.Tensor] = {}
    for name in dict.fromkeys(weight_map.values()):
        file = index.parent / name
        if not file.is_file():
            raise FileNotFoundError(f"{index}: lists shard {name}, which is not in {index.parent}")
        shard = _read_file(file, shapes_only)
        absent = [k for k, v in weight_map.items() if v == name and k not in shard]
        if absent:
            raise ValueError(f"{index}: {file.name} lacks {len(absent)} keys the index puts there, e.g. {absent[:3]}")
        state.update(shard)
    return state


def _read_file(path: Path, shapes_only: bool) -> dict[str, torch.Tensor]:
    if shapes_only and path.suffix == ".safetensors":
        return read_safetensors_shapes(path, "checkpoint")
    return load_state_dict_file(path, "checkpoint")


# ----------------------------------------------------------------------------- TorchScript archives

class _ScriptedObject:
    """Stands in for a scripted class (``__torch__.*``): keeps its attributes, runs none of its code."""

    def __setstate__(self, state: Any) -> None:
        self.state = state


_TENSOR_GLOBALS = {
    ("torch._utils", "_rebuild_tensor_v2"): torch._utils._rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): torch._utils._rebuild_parameter,
    ("collections", "OrderedDict"): OrderedDict,
    ("torch", "device"): torch.device,
}
# TorchScript's typed-container helpers: they only return their argument.
_CONTAINER_HELPERS = ("build_intlist", "build_doublelist", "build_boollist", "build_tensorlist", "build_complexlist",
                      "restore_type_tag")


def _same(value: Any, *_type_tag: Any) -> Any:
    return value
_STORAGE_NAMES = {
    "FloatStorage": torch.float32, "DoubleStorage": torch.float64, "HalfStorage": torch.float16,
    "BFloat16Storage": torch.bfloat16, "LongStorage": torch.int64, "IntStorage": torch.int32,
    "ShortStorage": torch.int16, "CharStorage": torch.int8, "ByteStorage": torch.uint8, "BoolStorage": torch.bool,
}


class _StorageType:
    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype


class _TorchScriptDataUnpickler(pickle.Unpickler):
    """Unpickles a TorchScript ``data.pkl``: tensors and containers only, scripted objects as records."""

    def __init__(self, file, archive: zipfile.ZipFile, prefix: str, where: str):
        super().__init__(file)
        self.archive, self.prefix, self.where = archive, prefix, where

    def find_class(self, module: str, name: str):
        if (module, name) in _TENSOR_GLOBALS:
            return _TENSOR_GLOBALS[(module, name)]
        if module == "torch.jit._pickle" and name in _CONTAINER_HELPERS:
            return _same
        if module == "torch" and name in _STORAGE_NAMES:
            return _StorageType(_STORAGE_NAMES[name])
        if module.startswith("__torch__"):
            return _ScriptedObject
        raise WeightFileError(f"{self.where}: the TorchScript archive's data.pkl refers to {module}.{name}, "
                              "which is not part of a weight file; refused")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise WeightFileError(f"{self.where}: unexpected persistent id {pid!r} in the TorchScript archive")
        _, storage_type, key, _location, numel = pid[:5]
        dtype = storage_type.dtype if isinstance(storage_type, _StorageType) else getattr(storage_type, "dtype", None)
        if dtype is None:
            raise WeightFileError(f"{self.where}: unknown storage type {storage_type!r} in the TorchScript archive")
        raw = self.archive.read(f"{self.prefix}data/{key}")
        data = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        values = data.view(dtype) if raw else torch.empty(0, dtype=dtype)
        if values.numel() != numel:
            raise WeightFileError(f"{self.where}: storage {key} holds {values.numel()} values, its record says {numel}")
        return torch.storage.TypedStorage(wrap_storage=values.untyped_storage(), dtype=dtype, _internal=True)


def _flatten(obj: Any, prefix: str, out: dict[str, torch.Tensor]) -> None:
    if isinstance(obj, _ScriptedObject):
        obj = getattr(obj, "state", None)
        if isinstance(obj, tuple) and obj and isinstance(obj[-1], dict):
            obj = obj[-1]
    if isinstance(obj, torch.Tensor):
        out[prefix[:-1]] = obj
    elif isinstance(obj, dict):
        for name, value in obj.items():
            if isinstance(name, str) and not name.startswith("_"):
                _flatten(value, f"{prefix}{name}.", out)


def read_torchscript_tensors(path: str | Path, key: str | None = None) -> dict[str, torch.Tensor]:
    """Every tensor attribute of a TorchScript archive's module tree, named as ``state_dict()`` names
    them (``visual.conv1.weight``), read from ``data.pkl`` without running the archive's code."""
    path = Path(path)
    where = _named(key, path)
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if not pickles:
            raise WeightFileError(f"{where}: a zip archive without a data.pkl: not a TorchScript weight file")
        prefix = pickles[0][: -len("data.pkl")]
        with archive.open(pickles[0]) as f:
            try:
                root = _TorchScriptDataUnpickler(f, archive, prefix, where).load()
            except WeightFileError:
                raise
            except Exception as err:  # noqa: BLE001
                raise WeightFileError(
                    f"{where}: unreadable TorchScript data.pkl ({type(err).__name__}: {err})") from err
    out: dict[str, torch.Tensor] = {}
    _flatten(root, "", out)
    if not out:
        raise WeightFileError(f"{where}: the TorchScript archive holds no tensors")
    return out
