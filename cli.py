"""Command-line entry: ``python cli.py {fit,validate,test,predict} --config configs/<name>.yaml``.

LightningCLI in subclass mode, so configs name any LightningModule / LightningDataModule of the
project by class path; configs stack (``--config base.yaml --config configs/ablations/x.yaml``)
and every key can be overridden on the command line. The run's config is saved next to its logs.
"""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility: must precede lightning)

from pathlib import Path  # noqa: E402

from lightning.pytorch.cli import LightningCLI  # noqa: E402

import callbacks  # noqa: E402,F401  (registers the project's classes for short names)
import datamodules  # noqa: E402,F401
import lightning_modules  # noqa: E402,F401


def _prompter_of(model):
    return getattr(model, "prompter", None)


# Config keys that name local files, and the README section that says how to obtain them.
MODEL_PATH_KEYS = {"checkpoint": "Pretrained weights", "path": "Pretrained weights",
                   "tokenizer_path": "Pretrained weights", "factual_path": "Pretrained weights"}
# Path keys directly under model.init_args (the judge's).
TOP_LEVEL_PATH_KEYS = {"model_path": "Pretrained weights", "adapter_path": "The VC-Inspector judge",
                       "vision_checkpoint": "The VC-Inspector judge"}
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


def missing_paths(config) -> list[str]:
    """Every configured local path that does not exist, as 'key: value (README section)' lines."""
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
    trainer = config.get("trainer") or {}
    callbacks = trainer.get("callbacks") if hasattr(trainer, "get") else None
    for callback in callbacks or []:
        args = _as_dict(_as_dict(callback).get("init_args"))
        value = args.get("checkpoint_path")
        if isinstance(value, str) and not Path(value).exists():
            problems.append(f"trainer.callbacks[{_as_dict(callback).get('class_path')}].checkpoint_path: {value!r} "
                            "(README section 'Datasets')")
    return problems


class GroveCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        # The data pipeline tokenises with the model's own prompter (one tokenizer, one source).
        parser.link_arguments("model", "data.init_args.prompter", compute_fn=_prompter_of, apply_on="instantiate")

    def before_instantiate_classes(self) -> None:
        # Fail before building a 7B model, with every missing file listed at once.
        config = self.config[self.config.subcommand] if self.config.get("subcommand") else self.config
        clear_null_paths(config)
        problems = missing_paths(config)
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


if __name__ == "__main__":
    cli_main()
