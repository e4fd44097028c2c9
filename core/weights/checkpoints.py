"""Lightning checkpoints: read with tensors and plain values only (no code run), and written as
weights only, for the files the project converts.

Lightning's own ``--ckpt_path`` resume is outside this reader: it restores a run's full training
state (optimizer, loops, callbacks), which needs the stock unpickler. Resume only from checkpoints
you wrote yourself.
"""
from __future__ import annotations

from core.weights.pretrained_folder import CONFIG_FILE, check_config_file

import pickle
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Mapping

import torch
from torch import Tensor

# --ckpt_path values Lightning resolves itself rather than as files
CKPT_PATH_KEYWORDS = ("last", "best", "hpc", "registry")


def read_checkpoint(path: str | Path, what: str = "--ckpt_path") -> dict:
    """A Lightning checkpoint read with tensors and plain values only (no code run); a clear error naming
    ``what`` and ``path`` when it is not one. The one reader of Lightning checkpoints outside resuming."""
    path = Path(path)
    if path.is_dir() and (path / CONFIG_FILE).is_file():
        # an exported folder whose config.json did not read as one: say what is wrong with it
        check_config_file(path)
    if path.is_dir():
        raise ValueError(f"{what} {path}: a folder, not a checkpoint file "
                         "(pick a .ckpt inside it, e.g. last.ckpt)")
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path}: no such file")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError as err:
        raise ValueError(f"{what} {path}: holds objects beyond tensors and plain values, so it is not read "
                         f"here ({str(err).splitlines()[0]})") from err
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile) as err:
        raise ValueError(f"{what} {path}: not a checkpoint torch can read ({type(err).__name__}: {err}); "
                         "give a .ckpt file written by `python cli.py fit` "
                         "(runs/<name>/version_<n>/checkpoints/)") from err
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt:
        found = sorted(ckpt)[:5] if isinstance(ckpt, dict) else type(ckpt).__name__
        raise ValueError(f"{what} {path}: not a Lightning checkpoint (no 'state_dict' entry; found {found}). "
                         "Plain weight files start a run through callbacks.init_from_checkpoint.InitFromCheckpoint "
                         "instead")
    return ckpt


def read_checkpoint_hparams(path: str | Path) -> dict:
    """The model hyper-parameters a Lightning checkpoint saved (:func:`read_checkpoint`)."""
    hparams = read_checkpoint(path).get("hyper_parameters") or {}
    return dict(hparams) if isinstance(hparams, dict) else {}


def lightning_checkpoint(state: Mapping[str, Tensor], prefix: str = "model.") -> dict:
    """A checkpoint that ``Trainer.{predict,test,validate}(ckpt_path=...)`` restores into GroveModule.

    Weights only (no optimizer or loop state), so it is safe to read with ``weights_only=True``.
    """
    import lightning

    return {"state_dict": OrderedDict((prefix + k, v) for k, v in state.items()),
            "pytorch-lightning_version": lightning.__version__, "epoch": 0, "global_step": 0}
