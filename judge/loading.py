"""Load a VC-Inspector judge for scoring: from a config (+ checkpoint), a Lightning checkpoint, or released weights.

``spec`` may be

* a YAML config (what ``python cli.py`` takes; several may be stacked, with ``--key=value``
  overrides), optionally with a Lightning checkpoint of that config (``ckpt_path``);
* a Lightning checkpoint (``.ckpt``) of :class:`~judge.module.JudgeModule`,
  rebuilt from its saved hyper-parameters;
* a merged Hugging Face Qwen2.5-VL folder (``config.json``: a released VC-Inspector);
* a LoRA adapter folder (``adapter_config.json``) over a local Qwen2.5-VL folder, given as
  ``base_model`` or recorded in the adapter's ``base_model_name_or_path``.

Nothing is downloaded: every path must exist locally. Checkpoints load with ``weights_only=True``.
"""
from __future__ import annotations

from core.lightning_cli import GroveCLI, read_checkpoint

import inspect
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from judge.model import VCInspectorJudge

CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass
class LoadedJudge:
    """The judge and the settings its config gives for scoring."""

    judge: Any
    num_frames: int = 32
    max_new_tokens: int = 64
    video_root: str | None = None


def _judge_cli(configs: Sequence[str], overrides: Sequence[str]):
    class ConfigOnlyCLI(GroveCLI):  # model and data from the config; no trainer, no run
        def instantiate_trainer(self, **kwargs):
            return None

    args = [a for c in configs for a in ("--config", str(c))] + list(overrides)
    with warnings.catch_warnings():  # the command's own sys.argv is not meant for this parser
        warnings.filterwarnings("ignore", message="LightningCLI's args parameter")
        return ConfigOnlyCLI(subclass_mode_model=True, subclass_mode_data=True, args=args, run=False,
                             parser_kwargs={"parser_mode": "omegaconf"}, save_config_callback=None)


def load_judge(spec: str | Sequence[str], ckpt_path: str | None = None, overrides: Sequence[str] = (),
               base_model: str | None = None, **judge_kwargs: Any) -> LoadedJudge:
    """A judge in eval mode (see the module docstring for what ``spec`` may be)."""
    from judge.module import JudgeModule

    specs = [spec] if isinstance(spec, (str, Path)) else list(spec)
    first = Path(specs[0])
    if first.suffix in CONFIG_SUFFIXES and first.is_file():
        cli = _judge_cli(specs, overrides)
        module = cli.model
        if not isinstance(module, JudgeModule):
            raise ValueError(f"{specs}: model.class_path is {type(module).__name__}, not a JudgeModule")
        if ckpt_path is not None:
            state = read_checkpoint(ckpt_path, "judge checkpoint")["state_dict"]
            module.load_state_dict(state, strict=module.strict_loading)
        data = getattr(cli.datamodule, "hparams", {}) or {}
        try:
            video_root = cli.datamodule.resolved_video_root()
        except (AttributeError, ValueError):
            video_root = None
        loaded = LoadedJudge(module.judge, int(data.get("num_frames", 32)), module.max_new_tokens, video_root)
    elif first.suffix == ".ckpt":
        checkpoint = read_checkpoint(first, "judge checkpoint")
        accepted = inspect.signature(JudgeModule).parameters
        hparams = {k: v for k, v in (checkpoint.get("hyper_parameters") or {}).items() if k in accepted}
        module = JudgeModule(**{**hparams, **judge_kwargs})
        module.load_state_dict(checkpoint["state_dict"], strict=module.strict_loading)
        loaded = LoadedJudge(module.judge, max_new_tokens=module.max_new_tokens)
    elif (first / "adapter_config.json").is_file():
        base = base_model or json.loads((first / "adapter_config.json").read_text()).get("base_model_name_or_path")
        if not base or not (Path(base) / "config.json").is_file():
            raise FileNotFoundError(f"LoRA adapter {first} needs its base Qwen2.5-VL as a local folder: "
                                    f"{base!r} is not one (pass base_model / --base_model)")
        loaded = LoadedJudge(VCInspectorJudge(model_path=str(base), adapter_path=str(first), **judge_kwargs))
    elif (first / "config.json").is_file():
        loaded = LoadedJudge(VCInspectorJudge(model_path=str(first), **judge_kwargs))
    else:
        raise FileNotFoundError(f"judge {first}: not a config file, a .ckpt, a Hugging Face model folder "
                                "(config.json) or a LoRA adapter folder (adapter_config.json)")
    loaded.judge.requires_grad_(False).eval()
    return loaded
