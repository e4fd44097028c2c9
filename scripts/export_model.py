"""Export a trained model (GROVE or the VC-Inspector judge) as a self-contained Hugging Face-style folder.

    python scripts/export_model.py --config configs/demo.yaml --ckpt_path runs/demo/.../last.ckpt --out exported/demo
    python scripts/export_model.py --config configs/judge_demo.yaml \
        --ckpt_path runs/judge_demo/checkpoints/last.ckpt --out exported/judge_demo

The config's model class decides which: a GroveModule writes a :class:`models.grove.Grove` folder, a
JudgeModule a :class:`judge.model.VCInspectorJudge` folder (config.json, model.safetensors or
shards with an index, tokenizer, preprocessing config, README.md model card). Nothing the model
was initialised from (CLIP, SAM, GLaMM, the LLM folder, the judge's vision tower) is read.
``--metrics`` takes a JSON of test metrics (``{"metrics": {...}}`` as ``make demo`` writes, or a
flat mapping) for the model card. Further ``--key=value`` arguments override the config as on
``cli.py``. The folder then loads with ``Grove.from_pretrained(DIR)`` (or ``VCInspectorJudge``), and
``cli.py predict/test``, ``python -m webdemo`` and ``python -m judge`` take it as ``--ckpt_path DIR``.
"""
from __future__ import annotations

import core  # noqa: F401
from core.command_parser import CommandParser
from core.config_loader import ConfigLoader
from core.weights import read_checkpoint
from core.weights.pretrained_folder import is_pretrained_folder

import json
import sys
import warnings
from pathlib import Path


def _parse_size(text: str) -> int:
    units = {"KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}
    text = text.strip().upper()
    for unit, factor in units.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


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


COMMAND = "scripts/export_model.py"


def export(configs: list[str], ckpt_path: str, out: str, overrides: list[str] = (), metrics: str | None = None,
           max_shard_bytes: int | None = None, name: str | None = None, overwrite: bool = False) -> Path:
    from core.output_folder import claim_output_folder, write_output_folder

    claim_output_folder(out, COMMAND, overwrite)  # refused before the model is built
    module, datamodule = build_module(configs, ckpt_path, list(overrides))
    card = {"name": name, "training_data": training_data(datamodule), "test_metrics": read_metrics(metrics),
            "metrics_source": metrics, "config": configs, "checkpoint": str(ckpt_path)}
    data_hp = dict(getattr(datamodule, "hparams", {}) or {})
    if type(module).__name__ == "GroveModule":
        from lightning_modules.grove_export import grove_settings

        model = module.model
        model.settings = grove_settings(module, data_hp, card)
    elif type(module).__name__ == "JudgeModule":
        from judge.pretrained import judge_settings

        model = module.judge
        model.settings = judge_settings(module, data_hp, card)
    else:
        raise ValueError(f"{', '.join(configs)}: model class {type(module).__name__} cannot be exported "
                         "(GroveModule or JudgeModule)")
    if max_shard_bytes:
        model.max_shard_bytes = max_shard_bytes
    write_output_folder(out, COMMAND, model.save_pretrained, overwrite)
    return Path(out)


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", role="input", action="append", required=True,
                        help="the config(s) the model was trained with")
    parser.add_argument("--ckpt_path", role="input", required=True,
                        help="a .ckpt of cli.py fit (or a converted release)")
    parser.add_argument("--out", role="output", required=True, help="the folder to write")
    parser.add_argument("--metrics", role="input", default=None, help="JSON of test metrics for the model card")
    parser.add_argument("--name", default=None, help="the model card's title")
    parser.add_argument("--max_shard_size", default=None, help="shard the weights above this size (e.g. 5GB)")
    parser.add_argument("--overwrite", action="store_true",
                        help="write into a non-empty folder this command did not write (same-named files replaced)")
    args, overrides = parser.parse_known_args(argv)
    from core.folder_lock import FolderInUseError
    from core.output_folder import OutputFolderError

    try:
        out = export(args.config, args.ckpt_path, args.out, overrides, args.metrics,
                     _parse_size(args.max_shard_size) if args.max_shard_size else None, args.name, args.overwrite)
    except (OutputFolderError, FolderInUseError) as err:
        parser.error(str(err))
    for path in sorted(p for p in out.iterdir() if not p.name.startswith(".")):
        print(f"{path.stat().st_size:>12,d}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
