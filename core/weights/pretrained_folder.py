"""A trained model as one self-contained folder, laid out as Hugging Face model repositories are.

    config.json                       the model's own configuration (enough to rebuild it)
    model.safetensors                 the weights; above ``max_shard_bytes`` instead
    model-00001-of-0000N.safetensors  shards, with model.safetensors.index.json
    tokenizer files, preprocessor_config.json, README.md (the model card)

This module writes and reads the weight files and the config of such a folder; what the config
holds is the model class's business (:mod:`models.grove.pretrained`, :mod:`judge.model.pretrained`).
Reading (through :func:`core.weights.read_weights`) refuses, naming the file: a shard the index
names that is missing, a shard that is not safetensors, tensors holding NaN, and weights that do
not fit the model the config builds (:func:`load_into`).
"""
from __future__ import annotations

from core.weights.dtypes import refuse_dtype_mismatch

import json
import re
from pathlib import Path

import torch

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
PREPROCESSOR_FILE = "preprocessor_config.json"
# Shard size: the Hugging Face default of recent transformers releases.
DEFAULT_MAX_SHARD_BYTES = 5 * 1024 ** 3


class PretrainedFolderError(ValueError):
    """An exported model folder that cannot be loaded as it is."""


# Config keys that size a model part: a value that is not a positive integer would fail deep inside
# the model's constructor (or a strict config class) with an error naming neither folder nor file.
_SIZE_KEY = re.compile(r"num_\w*(layers|heads)|\w*_(size|dim|layers|heads|chans)|dim|depth|width")
_REEXPORT = "fix it, or export the model again (grove export)"


def is_pretrained_folder(path: str | Path, model_type: str | None = None) -> bool:
    """Whether ``path`` is a folder whose config.json names a ``model_type`` (the given one, if any)."""
    config = Path(path) / CONFIG_FILE
    if not config.is_file():
        return False
    try:
        found = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return False
    return found is not None if model_type is None else found == model_type


def _size_problems(value, key: str = "") -> list[str]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _size_problems(v, f"{key}.{k}" if key else str(k))]
    name = key.rsplit(".", 1)[-1]
    if _SIZE_KEY.fullmatch(name) and value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1):
        return [f"{key} is {value!r}"]
    return []


def check_config_file(folder: str | Path) -> dict:
    """The config.json of an exported folder, checked: JSON (with line and column when not), an
    object naming a ``model_type``, sizes that are positive integers; a :class:`PretrainedFolderError`
    naming the folder's file and the key otherwise."""
    path = Path(folder) / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no {CONFIG_FILE}; not an exported model folder "
                                "(grove export writes one)")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise PretrainedFolderError(f"{path}: the exported folder's config is not valid JSON ({err.msg} at line "
                                    f"{err.lineno}, column {err.colno}); {_REEXPORT}") from None
    except UnicodeDecodeError as err:
        raise PretrainedFolderError(f"{path}: the exported folder's config is not UTF-8 text ({err.reason} at "
                                    f"byte {err.start}); {_REEXPORT}") from None
    if not isinstance(config, dict):
        raise PretrainedFolderError(f"{path}: the exported folder's config is a JSON {type(config).__name__}, not "
                                    f"an object; {_REEXPORT}")
    if not config.get("model_type"):
        raise PretrainedFolderError(f"{path}: the exported folder's config has no 'model_type'; {_REEXPORT}")
    problems = _size_problems(config)
    if problems:
        raise PretrainedFolderError(f"{path}: {'; '.join(problems)}: sizes must be positive integers; {_REEXPORT}")
    return config


def read_config(folder: str | Path, model_type: str) -> dict:
    """config.json of an exported folder (:func:`check_config_file`); an error naming the file when it
    is not one of ``model_type``."""
    config = check_config_file(folder)
    if config.get("model_type") != model_type:
        raise PretrainedFolderError(f"{Path(folder) / CONFIG_FILE}: model_type is {config.get('model_type')!r}, "
                                    f"not {model_type!r}")
    return config


def write_json(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=False) + "\n", encoding="utf-8")


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _readable(path: Path) -> None:
    """The permissions of a newly created file (safetensors writes its files owner-only)."""
    import os

    umask = os.umask(0)
    os.umask(umask)
    path.chmod(0o666 & ~umask)


def save_weights(state: dict[str, torch.Tensor], folder: str | Path,
                 max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES) -> list[str]:
    """Write ``state`` as model.safetensors, or as shards in key order with an index when the whole is
    larger than ``max_shard_bytes``. Tied tensors are written once per name (copied). Returns the files."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in [*folder.glob("model-*-of-*.safetensors"), folder / WEIGHTS_FILE, folder / INDEX_FILE]:
        stale.unlink(missing_ok=True)
    state = {k: v.detach().to("cpu").contiguous().clone() for k, v in state.items()}
    total = sum(_nbytes(v) for v in state.values())
    if total <= max_shard_bytes:
        save_file(state, str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
        _readable(folder / WEIGHTS_FILE)
        return [WEIGHTS_FILE]
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in state.items():
        if shards[-1] and size + _nbytes(tensor) > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += _nbytes(tensor)
    names = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    weight_map = {}
    for name, shard in zip(names, shards):
        save_file(shard, str(folder / name), metadata={"format": "pt"})
        _readable(folder / name)
        weight_map.update({key: name for key in shard})
    write_json(folder / INDEX_FILE, {"metadata": {"total_size": total}, "weight_map": weight_map})
    return names


def load_weights(folder: str | Path) -> dict[str, torch.Tensor]:
    """The state dict of an exported folder: model.safetensors, or every shard its index names, read by
    :func:`core.weights.read_weights` (tensors only; NaN refused; a shard the index names but the folder
    lacks, or that lacks a tensor the index puts there, is an error naming the file)."""
    from core.weights.files import read_weights

    folder = Path(folder)
    if not (folder / INDEX_FILE).is_file() and not (folder / WEIGHTS_FILE).is_file():
        raise FileNotFoundError(f"{folder}: neither {WEIGHTS_FILE} nor {INDEX_FILE}; the folder holds no weights")
    return read_weights(folder)


def load_into(module: torch.nn.Module, state: dict[str, torch.Tensor], where: str) -> None:
    """Load ``state`` into ``module``: every key, every shape; otherwise an error naming ``where``
    (the folder), a few keys and what config.json would have to say instead."""
    expected = module.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    shapes = [f"{k}: weights {tuple(state[k].shape)}, model {tuple(expected[k].shape)}"
              for k in expected if k in state and state[k].shape != expected[k].shape]
    if missing or unexpected or shapes:
        raise PretrainedFolderError(
            f"{where}: the weights do not fit the model its config.json describes: {len(missing)} missing "
            f"(e.g. {missing[:3]}), {len(unexpected)} unexpected (e.g. {unexpected[:3]}), {len(shapes)} of another "
            f"shape (e.g. {shapes[:2]}); config.json and the weights come from different models")
    refuse_dtype_mismatch(expected, state, where)
    module.load_state_dict(state, strict=True)


def resolve_folder(model_id: str | Path, *, revision: str | None = None, cache_dir: str | Path | None = None,
                   force_download: bool = False, local_files_only: bool = False, token=None) -> Path:
    """A local folder, or the snapshot of a hub repository id (downloaded, or from the local cache).

    Offline (``HF_HUB_OFFLINE=1``, ``local_files_only``, or no connection) a repository not in the
    cache is an error saying so, not a traceback from the download client."""
    path = Path(model_id).expanduser()
    if path.is_dir():
        return path
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError, OfflineModeIsEnabled

    offline = local_files_only or constants.HF_HUB_OFFLINE
    try:
        return Path(snapshot_download(repo_id=str(model_id), revision=revision, cache_dir=cache_dir,
                                      force_download=force_download, local_files_only=offline, token=token))
    except (LocalEntryNotFoundError, OfflineModeIsEnabled, OSError) as err:
        cache = cache_dir or constants.HF_HUB_CACHE
        why = ("the hub is offline here (HF_HUB_OFFLINE=1 or local_files_only)" if offline
               else f"the hub could not be reached ({type(err).__name__})")
        raise FileNotFoundError(f"{model_id}: not a local folder, and not in the local Hugging Face cache {cache}; "
                                f"{why}, so it cannot be downloaded. Give the folder's path, or download it "
                                "where the hub is reachable (huggingface-cli download REPO_ID)") from err
    except ValueError as err:  # not a valid repo id either
        raise FileNotFoundError(f"{model_id}: not a local folder, nor a hub repository id ({err})") from err
