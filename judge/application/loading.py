"""Load a VC-Inspector judge for scoring: from a config (+ checkpoint), a Lightning checkpoint, or released weights.

``spec`` may be

* a YAML config (what ``python cli.py`` takes; several may be stacked, with ``--key=value``
  overrides), optionally with a Lightning checkpoint of that config (``ckpt_path``);
* a Lightning checkpoint (``.ckpt``) of :class:`~judge.training.module.JudgeModule`,
  rebuilt from its saved hyper-parameters;
* a merged Hugging Face Qwen2.5-VL folder (``config.json``: a released VC-Inspector);
* a LoRA adapter folder (``adapter_config.json``) over a local Qwen2.5-VL folder, given as
  ``base_model`` or recorded in the adapter's ``base_model_name_or_path``;
* an exported judge folder (``grove export``), also as ``ckpt_path`` of a config.

With a checkpoint, the files the judge is initialised from (its vision tower) are not read.

Nothing is downloaded: every path must exist locally. Checkpoints load with ``weights_only=True``.
"""
from __future__ import annotations

from core.json_file import read_json
from core.weights import read_checkpoint
from core.weights.pretrained_folder import is_pretrained_folder

import inspect
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from judge.model.pretrained import MODEL_TYPE

CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass
class LoadedJudge:
    """The judge and the settings its config gives for scoring."""

    judge: Any
    num_frames: int = 32
    max_new_tokens: int = 64
    video_root: str | None = None


def _judge_cli(configs: Sequence[str], overrides: Sequence[str], weights_follow: bool = False):
    from core.config_loader import ConfigLoader  # Lightning: imported when a config is built, not on --help

    class ConfigOnlyCLI(ConfigLoader):  # model and data from the config; no trainer, no run
        def instantiate_trainer(self, **kwargs):
            return None

    # with a checkpoint, the files the judge is initialised from are not read (core.init_time_paths)
    ConfigOnlyCLI.weights_follow = weights_follow
    args = [a for c in configs for a in ("--config", str(c))] + list(overrides)
    with warnings.catch_warnings():  # the command's own sys.argv is not meant for this parser
        warnings.filterwarnings("ignore", message="LightningCLI's args parameter")
        return ConfigOnlyCLI(subclass_mode_model=True, subclass_mode_data=True, args=args, run=False,
                             parser_kwargs={"parser_mode": "omegaconf"}, save_config_callback=None)


JUDGE_CLASS = "judge.training.module.JudgeModule"


def refuse_other_model(checkpoint: dict[str, Any], path: str | Path) -> str | None:
    """The class a checkpoint was saved from (None when it does not say); a class other than the
    judge's (a GROVE ``.ckpt``) is an error naming the file and both classes."""
    hparams = checkpoint.get("hyper_parameters") or {}
    saved = hparams.get("_class_path") if isinstance(hparams, dict) else None
    if saved and str(saved).rsplit(".", 1)[-1] != "JudgeModule":  # also the judge's class paths before its move
        raise ValueError(f"{path} is a checkpoint of {saved}, not of {JUDGE_CLASS}: give a judge checkpoint "
                         "(python cli.py fit --config configs/judge.yaml writes one)")
    return saved


def load_judge_state(module: Any, checkpoint: dict[str, Any], path: str | Path) -> None:
    """Load a checkpoint's ``state_dict`` into a JudgeModule; weights of another model are an error
    naming the file, the classes and a few keys, not a page of key names."""
    saved = refuse_other_model(checkpoint, path)
    state = checkpoint.get("state_dict")
    if not isinstance(state, dict):
        raise ValueError(f"{path}: not a Lightning checkpoint (no 'state_dict' entry)")
    try:
        module.load_state_dict(state, strict=module.strict_loading)
    except RuntimeError as err:
        expected = set(module.state_dict())
        unexpected = sorted(set(state) - expected)
        missing = sorted(expected - set(state)) if module.strict_loading else []
        if not unexpected and not missing:
            raise ValueError(f"{path}: its weights do not fit {JUDGE_CLASS} ({str(err).splitlines()[-1]})") from None
        raise ValueError(
            f"{path}: its weights do not fit {JUDGE_CLASS}: {len(unexpected)} unexpected key(s) (e.g. "
            f"{unexpected[:3]}), {len(missing)} missing (e.g. {missing[:3]}); is it a checkpoint of another "
            f"model{' (' + str(saved) + ')' if saved else ''}?") from None


def load_judge(spec: str | Sequence[str], ckpt_path: str | None = None, overrides: Sequence[str] = (),
               base_model: str | None = None, **judge_kwargs: Any) -> LoadedJudge:
    """A judge in eval mode (see the module docstring for what ``spec`` may be)."""
    from judge.model.vc_inspector import VCInspectorJudge
    from judge.training.module import JudgeModule

    specs = [spec] if isinstance(spec, (str, Path)) else list(spec)
    first = Path(specs[0])
    if first.suffix in CONFIG_SUFFIXES and first.is_file():
        exported = ckpt_path is not None and is_pretrained_folder(ckpt_path, MODEL_TYPE)
        cli = _judge_cli(specs, overrides, weights_follow=ckpt_path is not None)
        module = cli.model
        if not isinstance(module, JudgeModule):
            raise ValueError(f"{specs}: model.class_path is {type(module).__name__}, not a JudgeModule")
        if exported:  # the folder's own architecture and weights; the config gives the data settings
            module.judge = VCInspectorJudge.from_pretrained(ckpt_path)
            module.prompter = module.judge.prompter
            module.max_new_tokens = int(module.judge.settings.get("scoring", {}).get("max_new_tokens",
                                                                                    module.max_new_tokens))
        elif ckpt_path is not None:
            load_judge_state(module, read_checkpoint(ckpt_path, "judge checkpoint"), ckpt_path)
        data = getattr(cli.datamodule, "hparams", {}) or {}
        try:
            video_root = cli.datamodule.resolved_video_root()
        except (AttributeError, ValueError):
            video_root = None
        loaded = LoadedJudge(module.judge, int(data.get("num_frames", 32)), module.max_new_tokens, video_root)
    elif first.suffix == ".ckpt":
        checkpoint = read_checkpoint(first, "judge checkpoint")
        refuse_other_model(checkpoint, first)  # before building a judge for nothing
        accepted = inspect.signature(JudgeModule).parameters
        hparams = {k: v for k, v in (checkpoint.get("hyper_parameters") or {}).items() if k in accepted}
        if not hparams.get("checkpoint_trainable_only"):  # every weight is in the checkpoint
            hparams["vision_checkpoint"] = None
            hparams["pretrained_weights"] = False
        module = JudgeModule(**{**hparams, **judge_kwargs})
        load_judge_state(module, checkpoint, first)
        loaded = LoadedJudge(module.judge, max_new_tokens=module.max_new_tokens)
    elif is_pretrained_folder(first, MODEL_TYPE):
        judge = VCInspectorJudge.from_pretrained(first)
        scoring = judge.settings.get("scoring") or {}
        loaded = LoadedJudge(judge, int(scoring.get("num_frames", 32)), int(scoring.get("max_new_tokens", 64)))
    elif (first / "adapter_config.json").is_file():
        base = base_model or read_json((first / "adapter_config.json")).get("base_model_name_or_path")
        if not base or not (Path(base) / "config.json").is_file():
            raise FileNotFoundError(f"LoRA adapter {first} needs its base Qwen2.5-VL as a local folder: "
                                    f"{base!r} is not one (pass base_model / --base-model)")
        loaded = LoadedJudge(VCInspectorJudge(model_path=str(base), adapter_path=str(first), **judge_kwargs))
    elif (first / "config.json").is_file():
        loaded = LoadedJudge(VCInspectorJudge(model_path=str(first), **judge_kwargs))
    else:
        raise FileNotFoundError(f"judge {first}: not a config file, a .ckpt, a Hugging Face model folder "
                                "(config.json) or a LoRA adapter folder (adapter_config.json)")
    loaded.judge.requires_grad_(False).eval()
    return loaded
