"""A trained checkpoint of ``cli.py fit`` as a self-contained Hugging Face-style folder
(``grove export``).

The config's model class decides what is written: a GroveModule its GROVE
(:func:`models.grove.export.grove_settings`), a JudgeModule its VC-Inspector judge
(:func:`judge.model.pretrained.judge_settings`). The module is built from the configs as ``cli.py`` builds
it, with the checkpoint's weights and nothing it was initialised from read.
"""
from __future__ import annotations

from core.config_loader import ConfigLoader
from core.weights import read_checkpoint
from core.weights.pretrained_folder import is_pretrained_folder

import json
import warnings
from pathlib import Path


def build_module(configs: list[str], ckpt_path: str, overrides: list[str]):
    """The config's LightningModule and datamodule with the checkpoint's weights (init-time files unread)."""
    class ExportCLI(ConfigLoader):
        weights_follow = True

        def instantiate_trainer(self, **kwargs):
            return None

    args = [a for c in configs for a in ("--config", c)] + list(overrides)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="LightningCLI's args parameter")
        cli = ExportCLI(subclass_mode_model=True, subclass_mode_data=True, args=args, run=False,
                        parser_kwargs={"parser_mode": "omegaconf"}, save_config_callback=None)
    module = cli.model
    if is_pretrained_folder(ckpt_path):
        from core.init_time_paths import exported_module
        from core.weights.pretrained_folder import load_into, load_weights

        _, _, prefix = exported_module(ckpt_path)
        load_into(module.get_submodule(prefix.rstrip(".")), load_weights(ckpt_path), ckpt_path)
    else:
        checkpoint = read_checkpoint(ckpt_path)
        module.load_state_dict(checkpoint["state_dict"], strict=getattr(module, "strict_loading", True))
    return module.eval(), cli.datamodule


def training_data(datamodule) -> str:
    if datamodule is None:
        return "Not recorded."
    hp = {k: v for k, v in dict(getattr(datamodule, "hparams", {}) or {}).items()
          if not k.startswith("_") and ("train" in k or k in ("synthetic", "num_train", "video_root"))}
    return f"`{type(datamodule).__module__}.{type(datamodule).__qualname__}`, {json.dumps(hp, default=str)}"


def read_metrics(path: str | None) -> dict:
    if path is None:
        return {}
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    data = data.get("metrics", data) if isinstance(data, dict) else {}
    return {k: v for k, v in data.items() if isinstance(v, (int, float))}


COMMAND = "grove export"


def export(configs: list[str], ckpt_path: str, out: str, overrides: list[str] = (), metrics: str | None = None,
           max_shard_bytes: int | None = None, name: str | None = None, overwrite: bool = False) -> Path:
    """Export into ``out`` under the output-folder contract (:mod:`core.output_folder`): a foreign
    non-empty folder is refused before the model is built, unless ``overwrite``."""
    from core.output_folder import claim_output_folder, write_output_folder

    claim_output_folder(out, COMMAND, overwrite)
    module, datamodule = build_module(configs, ckpt_path, list(overrides))
    card = {"name": name, "training_data": training_data(datamodule), "test_metrics": read_metrics(metrics),
            "metrics_source": metrics, "config": configs, "checkpoint": str(ckpt_path)}
    data_hp = dict(getattr(datamodule, "hparams", {}) or {})
    if type(module).__name__ == "GroveModule":
        from models.grove.export import grove_settings

        model = module.model
        model.settings = grove_settings(module, data_hp, card)
    elif type(module).__name__ == "JudgeModule":
        from judge.model.pretrained import judge_settings

        model = module.judge
        model.settings = judge_settings(module, data_hp, card)
    else:
        raise ValueError(f"{', '.join(configs)}: model class {type(module).__name__} cannot be exported "
                         "(GroveModule or JudgeModule)")
    if max_shard_bytes:
        model.max_shard_bytes = max_shard_bytes
    write_output_folder(out, COMMAND, model.save_pretrained, overwrite)
    return Path(out)
