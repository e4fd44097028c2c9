"""The project's LightningCLI (:class:`GroveCLI`): configs -> model, data and trainer, for ``cli.py``
and for every tool that builds what a config names (the judge's loader, the tower pre-training).

LightningCLI in subclass mode, so configs name any LightningModule / LightningDataModule of the
project by class path (``module.Class``); configs stack (``--config base.yaml --config
configs/ablations/x.yaml``) and every key can be overridden on the command line. The run's config
is saved next to its logs.

With ``--ckpt_path``, the model's hyper-parameters saved in the checkpoint fill in what the
config leaves at the class defaults, and everything the config files or the command line set
wins (the keys that differ from the checkpoint are listed in a warning). A checkpoint of another
LightningModule class is an error naming both classes; a checkpoint or config naming a class by
a path it has moved from is mapped to (checkpoint) or named with (config) its current path.
``--ckpt_path`` may also be an exported model folder (``scripts/export_model.py``): its config.json
rebuilds the module and its safetensors weights are loaded here. Whenever a checkpoint provides the
weights, the files the model is initialised from are neither required nor read (:mod:`core.init_time_paths`).
Resuming restores a full training state with Lightning's own loader, which unpickles objects
beyond tensors: resume only from checkpoints you wrote (pre-trained weights from elsewhere go
through ``callbacks.init_from_checkpoint.InitFromCheckpoint``, which reads tensors only).
"""
from __future__ import annotations

from core.dict_merge import merge_dicts
from core.init_time_paths import drop_init_time_paths, exported_module, is_init_time_key, strict_init_callback
from core.pretrained_folder import is_pretrained_folder, load_into, load_weights

import json
import pickle
import sys
import zipfile
from pathlib import Path

import torch
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.utilities import rank_zero_warn


def _prompter_of(model):
    return getattr(model, "prompter", None)


# Config keys that name local files, and the README section that says how to obtain them.
MODEL_PATH_KEYS = {"checkpoint": "Pretrained weights", "path": "Pretrained weights",
                   "tokenizer_path": "Pretrained weights", "factual_path": "Pretrained weights"}
# Path keys directly under model.init_args (the judge's).
TOP_LEVEL_PATH_KEYS = {"model_path": "Pretrained weights", "adapter_path": "The VC-Inspector judge",
                       "vision_checkpoint": "The VC-Inspector judge", "init_from_glamm": "Pretrained weights"}
DATA_PATH_SUFFIXES = ("_annotations", "video_root", "_keys")


def _as_dict(value) -> dict:
    if hasattr(value, "as_dict"):  # jsonargparse Namespace
        return value.as_dict()
    return value if isinstance(value, dict) else {}


def _is_path_key(name: str) -> bool:
    return name in MODEL_PATH_KEYS or name.endswith(("_checkpoint", "_path"))


def clear_null_paths(config) -> list[str]:
    """Model path keys given as the text 'null'/'None' (a command-line ``--...checkpoint=null``, which the
    omegaconf parser passes on as a string) become None, i.e. "no file". Returns the keys changed."""
    changed = []
    model = config.get("model") or {}

    def is_null_text(value) -> bool:
        return isinstance(value, str) and value.strip().lower() in ("null", "none", "~")

    for part, fields in _as_dict(model.get("init_args")).items():
        if _is_path_key(part) and is_null_text(fields):  # e.g. the judge's vision_checkpoint
            config[f"model.init_args.{part}"] = None
            changed.append(f"model.{part}")
        for name, value in _as_dict(fields).items():
            if _is_path_key(name) and is_null_text(value):
                config[f"model.init_args.{part}.{name}"] = None
                changed.append(f"model.{part}.{name}")
    return changed


def _videos_found(spec: str) -> bool:
    """Whether ``data.videos`` (a file, a folder or a glob pattern) names anything."""
    import glob

    path = Path(spec).expanduser()
    return path.exists() or (any(c in spec for c in "*?[") and bool(glob.glob(str(path), recursive=True)))


def missing_paths(config, subcommand: str | None = None) -> list[str]:
    """Every configured local path that does not exist, as 'key: value (README section)' lines.

    ``data.videos`` (what ``predict`` reads) is checked for ``predict`` only."""
    problems = []
    model = config.get("model") or {}
    for part, fields in _as_dict(model.get("init_args")).items():
        if part in TOP_LEVEL_PATH_KEYS and isinstance(fields, str) and not Path(fields).exists():
            problems.append(f"model.init_args.{part}: {fields!r} (README section '{TOP_LEVEL_PATH_KEYS[part]}')")
        for name, value in _as_dict(fields).items():
            if name in MODEL_PATH_KEYS and isinstance(value, str) and not Path(value).exists():
                problems.append(f"model.{part}.{name}: {value!r} (README section '{MODEL_PATH_KEYS[name]}')")
    data = config.get("data") or {}
    for name, value in _as_dict(data.get("init_args")).items():
        if name.endswith(DATA_PATH_SUFFIXES) and isinstance(value, str) and not Path(value).exists():
            problems.append(f"data.{name}: {value!r} (README section 'Datasets')")
    videos = _as_dict(data.get("init_args")).get("videos")
    if subcommand == "predict" and isinstance(videos, str) and not _videos_found(videos):
        problems.append(f"data.videos: {videos!r} matches no file, folder or glob pattern "
                        "(README section 'Predict on videos')")
    trainer = config.get("trainer") or {}
    callback_configs = trainer.get("callbacks") if hasattr(trainer, "get") else None
    for callback in callback_configs or []:
        args = _as_dict(_as_dict(callback).get("init_args"))
        value = args.get("checkpoint_path")
        if isinstance(value, str) and not Path(value).exists():
            problems.append(f"trainer.callbacks[{_as_dict(callback).get('class_path')}].checkpoint_path: {value!r} "
                            "(README section 'Datasets')")
    return problems


# Classes that moved, by the path checkpoints and saved run configs name them with -> where they live now.
MOVED_CLASS_PATHS = {
    "lightning_modules.judge_module.JudgeModule": "judge.module.JudgeModule",
    "lightning_modules.judge_module.WarmupCosineDecay": "lightning_modules.schedules.WarmupCosineDecay",
    "datamodules.judge_datamodule.JudgeDataModule": "judge.datamodule.JudgeDataModule",
    "callbacks.judge_callback.VCInspectorScore": "judge.callback.VCInspectorScore",
}


def moved_class_paths(args: list[str]) -> list[str]:
    """'file: old -> new' for every moved class path that a ``--config`` file or an argument still names."""
    found = []
    for n, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith("--config=") else None
        if arg == "--config" and n + 1 < len(args):
            value = args[n + 1]
        texts = [(value, Path(value).read_text())] if value and Path(value).is_file() else []
        texts += [("the command line", arg)] if not arg.startswith("--config") else []
        for where, text in texts:
            found += [f"{where}: {old} -> {new}" for old, new in MOVED_CLASS_PATHS.items() if old in text]
    return found


def untrained_weights_warning(subcommand: str | None, ckpt_path) -> str | None:
    """The warning for evaluating or predicting without ``--ckpt_path`` (None when one is given or
    when fitting): the model then keeps the weights its config builds, random wherever the config
    names no pre-trained file, and its outputs mean nothing."""
    if subcommand not in ("validate", "test", "predict") or ckpt_path:
        return None
    return (f"\n{'=' * 78}\n{subcommand} WITHOUT --ckpt_path: the model keeps the weights its config builds; every "
            "part the config does not load from a pre-trained file is RANDOMLY INITIALISED, so its outputs mean "
            "nothing. Give --ckpt_path=<a .ckpt written by `python cli.py fit`, or a converted official GROVE "
            f"checkpoint> to {subcommand} with trained weights.\n{'=' * 78}")


# --ckpt_path values Lightning resolves itself rather than as files
CKPT_PATH_KEYWORDS = ("last", "best", "hpc", "registry")


def read_checkpoint(path: str | Path, what: str = "--ckpt_path") -> dict:
    """A Lightning checkpoint read with tensors and plain values only (no code run); a clear error naming
    ``what`` and ``path`` when it is not one. The one reader of Lightning checkpoints outside resuming."""
    path = Path(path)
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


def _plain(value):
    """A value as JSON would hold it (tuples as lists), for comparing a config with a checkpoint."""
    return json.loads(json.dumps(value, default=str))


def _differences(checkpoint: dict, given: dict, prefix: str) -> list[str]:
    lines = []
    for key, value in given.items():
        if key not in checkpoint:
            continue
        if isinstance(value, dict) and isinstance(checkpoint[key], dict):
            lines += _differences(checkpoint[key], value, f"{prefix}{key}.")
        elif _plain(value) != _plain(checkpoint[key]):
            lines.append(f"{prefix}{key}: checkpoint {checkpoint[key]!r}, config {value!r}")
    return lines


def _class_name(path: str | None) -> str | None:
    """``module.Class`` resolved through modules already imported (never imports what a checkpoint names)."""
    if not path:
        return None
    path = MOVED_CLASS_PATHS.get(path, path)
    module, _, name = path.rpartition(".")
    cls = getattr(sys.modules.get(module), name, None)
    return f"{cls.__module__}.{cls.__qualname__}" if isinstance(cls, type) else path


class GroveCLI(LightningCLI):
    def parse_arguments(self, parser, args) -> None:
        self._given_args = list(sys.argv[1:] if args is None else args) if not isinstance(args, dict) else None
        moved = moved_class_paths(self._given_args or [])
        if moved:
            raise ValueError("these class paths moved; replace each old path with the new one:\n  "
                             + "\n  ".join(moved))
        super().parse_arguments(parser, args)

    def _explicit_model(self) -> dict:
        """The model section as the config files and the command line give it, without class defaults."""
        if self._given_args is None:
            return {}
        explicit = self.parser.parse_args(self._given_args, defaults=False)
        model = explicit.get(f"{self.config.subcommand}.model")
        return _as_dict(model) if model is not None else {}

    def _parse_ckpt_path(self) -> None:
        """Checkpoint hyper-parameters under the config (see the module docstring), not over it."""
        if not self.config.get("subcommand"):
            return
        subcommand = self.config.subcommand
        ckpt_path = self.config[subcommand].get("ckpt_path")
        if not ckpt_path or str(ckpt_path) in CKPT_PATH_KEYWORDS:
            return
        if not Path(ckpt_path).exists():
            raise FileNotFoundError(f"--ckpt_path {ckpt_path}: no such file")
        if is_pretrained_folder(ckpt_path):  # an exported folder: its config.json describes the module
            exported_class, hparams, prefix = exported_module(ckpt_path)
            hparams["_class_path"] = exported_class
            self._exported_folder = (Path(ckpt_path), prefix)
        else:
            hparams = read_checkpoint_hparams(ckpt_path)
        hparams.pop("_instantiator", None)
        saved_class = hparams.pop("_class_path", None)
        saved_class = MOVED_CLASS_PATHS.get(saved_class, saved_class)
        if not hparams and saved_class is None:
            return
        given = self._explicit_model()
        given_class = given.get("class_path")
        if saved_class and given_class and _class_name(saved_class) != _class_name(given_class):
            raise ValueError(
                f"--ckpt_path {ckpt_path} is a checkpoint of {saved_class}, but the config's model is "
                f"{given_class}: give the config the checkpoint was trained with, or a checkpoint of {given_class}")
        given_args = _as_dict(given.get("init_args"))
        # the files the model is initialised from are not read with a checkpoint (core.init_time_paths)
        changed = [line for line in _differences(hparams, given_args, "model.init_args.")
                   if not is_init_time_key(line.split(":", 1)[0])]
        if changed:
            rank_zero_warn(f"--ckpt_path {ckpt_path}: the config sets these model settings differently from the "
                           "checkpoint; the config's values are used:\n  " + "\n  ".join(changed))
        model = {"class_path": given_class or saved_class or self.config[subcommand].model.class_path,
                 "init_args": merge_dicts(hparams, given_args)}
        self.config = self.parser.parse_object({subcommand: {"model": model}}, self.config)

    _exported_folder: tuple[Path, str] | None = None
    # None: decided from the subcommand and the config (see _weights_from_checkpoint)
    weights_follow: bool | None = None

    def _weights_from_checkpoint(self, config) -> bool:
        """Whether every weight comes from a checkpoint (``--ckpt_path``, or fitting from a strict
        ``InitFromCheckpoint``), so that the files the model is initialised from are not needed."""
        if self.weights_follow is not None:
            return self.weights_follow
        fitting = self.config.get("subcommand") == "fit"
        return bool(config.get("ckpt_path")) or (fitting and strict_init_callback(config))

    def instantiate_classes(self) -> None:
        super().instantiate_classes()
        if self._exported_folder is not None:  # its weights load here; Lightning reads .ckpt files only
            folder, prefix = self._exported_folder
            load_into(self.model.get_submodule(prefix.rstrip(".")), load_weights(folder), str(folder))
            self.config_init[self.config.subcommand]["ckpt_path"] = None

    def add_arguments_to_parser(self, parser) -> None:
        # The data pipeline tokenises with the model's own prompter (one tokenizer, one source).
        parser.link_arguments("model", "data.init_args.prompter", compute_fn=_prompter_of, apply_on="instantiate")

    def before_instantiate_classes(self) -> None:
        # Fail before building a 7B model, with every missing file listed at once.
        config = self.config[self.config.subcommand] if self.config.get("subcommand") else self.config
        warning = untrained_weights_warning(self.config.get("subcommand"), config.get("ckpt_path"))
        if warning:
            rank_zero_warn(warning)
        clear_null_paths(config)
        if self._weights_from_checkpoint(config):
            drop_init_time_paths(config)
        problems = missing_paths(config, self.config.get("subcommand"))
        if problems:
            raise FileNotFoundError("these configured paths do not exist:\n  " + "\n  ".join(problems)
                                    + "\nSee the README sections named, then fix the config or override "
                                      "the keys on the command line (e.g. --model.init_args.<part>.<key>=PATH).")


def cli_main(args: list[str] | None = None, run: bool = True) -> GroveCLI:
    """Run the CLI; tests call this in-process with a list of arguments."""
    return GroveCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_kwargs={"overwrite": True},
        parser_kwargs={"parser_mode": "omegaconf"},
        args=args,
        run=run,
    )

