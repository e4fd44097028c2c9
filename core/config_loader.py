"""The project's config loading (:class:`ConfigLoader`): stacked YAML configs -> model, data and
trainer, for the command line (:mod:`command_line.grove_cli`) and for every tool that builds what a
config names (the judge's loader, the web demo, the tower pre-training).

LightningCLI in subclass mode, so configs name any LightningModule / LightningDataModule of the
project by class path (``module.Class``); configs stack (``--config base.yaml --config
configs/ablations/x.yaml``) and every key can be overridden on the command line.

With ``--ckpt_path`` (or ``--ckpt-path``, the same option), the model's hyper-parameters saved in the
checkpoint fill in what the config leaves at the class defaults, and everything the config files or
the command line set wins (the keys that differ from the checkpoint are listed in a warning). A checkpoint of another
LightningModule class is an error naming both classes. ``--ckpt_path`` may also be an exported model
folder (``grove export``): its config.json rebuilds the module and its safetensors weights are
loaded here. Whenever a checkpoint provides the weights, the files the model is initialised from are
neither required nor read (:mod:`core.init_time_paths`). Checkpoints are read through
:mod:`core.weights` (tensors and plain values only); resuming restores a full training state with
Lightning's own loader, which unpickles objects beyond tensors: resume only from checkpoints you
wrote (pre-trained weights from elsewhere go through
``callbacks.init_from_checkpoint.InitFromCheckpoint``, which reads tensors only).
"""
from __future__ import annotations

from core.command_parser import LIGHTNING_SPELLINGS
from core.dict_merge import merge_dicts
from core.init_time_paths import drop_init_time_paths, exported_module, is_init_time_key, strict_init_callback
from core.weights import CKPT_PATH_KEYWORDS, read_checkpoint_hparams
from core.weights.pretrained_folder import is_pretrained_folder, load_into, load_weights

import json
import sys
from pathlib import Path

import yaml
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


def as_dict(value) -> dict:
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

    for part, fields in as_dict(model.get("init_args")).items():
        if _is_path_key(part) and is_null_text(fields):  # e.g. the judge's vision_checkpoint
            config[f"model.init_args.{part}"] = None
            changed.append(f"model.{part}")
        for name, value in as_dict(fields).items():
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
    for part, fields in as_dict(model.get("init_args")).items():
        if part in TOP_LEVEL_PATH_KEYS and isinstance(fields, str) and not Path(fields).exists():
            problems.append(f"model.init_args.{part}: {fields!r} (README section '{TOP_LEVEL_PATH_KEYS[part]}')")
        for name, value in as_dict(fields).items():
            if name in MODEL_PATH_KEYS and isinstance(value, str) and not Path(value).exists():
                problems.append(f"model.{part}.{name}: {value!r} (README section '{MODEL_PATH_KEYS[name]}')")
    data = config.get("data") or {}
    generated = as_dict(as_dict(data.get("init_args")).get("generate_from"))  # split files written on first use
    for name, value in as_dict(data.get("init_args")).items():
        if name.endswith("_annotations") and name[: -len("_annotations")] in generated:
            continue
        if name.endswith(DATA_PATH_SUFFIXES) and isinstance(value, str) and not Path(value).exists():
            problems.append(f"data.{name}: {value!r} (README section 'Datasets')")
    videos = as_dict(data.get("init_args")).get("videos")
    if subcommand == "predict" and isinstance(videos, str) and not _videos_found(videos):
        problems.append(f"data.videos: {videos!r} matches no file, folder or glob pattern "
                        "(README section 'Predict on videos')")
    trainer = config.get("trainer") or {}
    callback_configs = trainer.get("callbacks") if hasattr(trainer, "get") else None
    for callback in callback_configs or []:
        args = as_dict(as_dict(callback).get("init_args"))
        value = args.get("checkpoint_path")
        if isinstance(value, str) and not Path(value).exists():
            problems.append(f"trainer.callbacks[{as_dict(callback).get('class_path')}].checkpoint_path: {value!r} "
                            "(README section 'Datasets')")
    return problems


def lightning_spelling(token: str) -> str:
    """A command-line token with the project's spelling of an option LightningCLI spells otherwise
    (``--ckpt-path[=X]``) in LightningCLI's (``--ckpt_path[=X]``)."""
    name, equals, value = token.partition("=")
    lightning = {ours: theirs for theirs, ours in LIGHTNING_SPELLINGS.items()}
    return lightning[name] + equals + value if name in lightning else token


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
    module, _, name = path.rpartition(".")
    cls = getattr(sys.modules.get(module), name, None)
    return f"{cls.__module__}.{cls.__qualname__}" if isinstance(cls, type) else path


class ConfigLoader(LightningCLI):
    """LightningCLI with the project's config rules (module docstring); builds, never runs unless asked."""

    def parse_arguments(self, parser, args) -> None:
        if not isinstance(args, dict):  # the project's --ckpt-path is LightningCLI's --ckpt_path
            args = [lightning_spelling(token) for token in (sys.argv[1:] if args is None else args)]
        self._given_args = args if not isinstance(args, dict) else None
        super().parse_arguments(parser, args)

    def _explicit_model(self) -> dict:
        """The model section as the config files and the command line give it, without class defaults."""
        if self._given_args is None:
            return {}
        explicit = self.parser.parse_args(self._given_args, defaults=False)
        model = explicit.get(f"{self.config.subcommand}.model")
        return as_dict(model) if model is not None else {}

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
        if not hparams and saved_class is None:
            return
        given = self._explicit_model()
        given_class = given.get("class_path")
        if saved_class and given_class and _class_name(saved_class) != _class_name(given_class):
            raise ValueError(
                f"--ckpt_path {ckpt_path} is a checkpoint of {saved_class}, but the config's model is "
                f"{given_class}: give the config the checkpoint was trained with, or a checkpoint of {given_class}")
        given_args = as_dict(given.get("init_args"))
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

    def _dump_config(self) -> None:
        """The config as the model's hyper-parameters record it, dumped as LightningCLI dumps it but
        without jsonargparse's second validation of the whole config (about 0.1 s): it was validated
        when parsed, and with a checkpoint's hyper-parameters merged in."""
        if hasattr(self, "config_dump"):
            return
        self.config_dump = yaml.safe_load(self.parser.dump(self.config, skip_link_targets=False, skip_unset=False,
                                                           skip_validation=True, format="yaml"))
        if "subcommand" in self.config:
            self.config_dump = self.config_dump[self.config.subcommand]

    def instantiate_classes(self) -> None:
        super().instantiate_classes()
        if self._exported_folder is not None:  # its weights load here; Lightning reads .ckpt files only
            folder, prefix = self._exported_folder
            load_into(self.model.get_submodule(prefix.rstrip(".")), load_weights(folder), str(folder))
            self.config_init[self.config.subcommand]["ckpt_path"] = None

    def add_arguments_to_parser(self, parser) -> None:
        # The data pipeline tokenises with the model's own prompter (one tokenizer, one source).
        parser.link_arguments("model", "data.init_args.prompter", compute_fn=_prompter_of, apply_on="instantiate")
        # every run's config.yaml carries it, so any loader of one knows the key (GroveCLI applies it)
        parser.add_argument("--video", type=bool, default=True,
                            help="predict: also write the annotated MP4s (false: the predictions files only; "
                                 "configs/overlays/no_video.yaml)")

    def before_instantiate_classes(self) -> None:
        # Fail before building a 7B model, with every missing file listed at once.
        config = self.config[self.config.subcommand] if self.config.get("subcommand") else self.config
        clear_null_paths(config)
        if self._weights_from_checkpoint(config):
            drop_init_time_paths(config)
        problems = missing_paths(config, self.config.get("subcommand"))
        if problems:
            raise FileNotFoundError("these configured paths do not exist:\n  " + "\n  ".join(problems)
                                    + "\nSee the README sections named, then fix the config or override "
                                      "the keys on the command line (e.g. --model.init_args.<part>.<key>=PATH).")


def load_configured(args: list[str]) -> ConfigLoader:
    """What ``args`` (``--config`` files and ``--key=value`` overrides) name, built as ``cli.py`` builds
    it and not run: ``.model``, ``.datamodule``, ``.trainer``."""
    return ConfigLoader(subclass_mode_model=True, subclass_mode_data=True, save_config_kwargs={"overwrite": True},
                        parser_kwargs={"parser_mode": "omegaconf"}, args=args, run=False)
