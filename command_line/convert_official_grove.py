"""Convert (or check) a released GROVE checkpoint for this project.

    grove convert-grove grove_ft_iground_ckpt.bin --config configs/official/grove.yaml --check
    grove convert-grove grove_ft_iground_ckpt.bin --config configs/official/grove.yaml \
        --out grove.ckpt
    grove convert-grove grove_ft_iground_ckpt.bin --config configs/official/grove.yaml \
        --export exported/grove_iground

CKPT is a DeepSpeed zero_to_fp32 ``.bin`` or the Hugging Face folder of the same model. ``--check``
reads no weights (the model is built on the meta device; works on a checkpoint of meta tensors)
and prints what every key became; both modes exit with status 1 naming each unaccounted key,
missing tensor or shape mismatch. The ``--out`` file is what ``cli.py predict/test --ckpt_path``
and ``callbacks.init_from_checkpoint.InitFromCheckpoint`` take; ``--export DIR`` writes an exported
folder instead (``grove export``: config.json, safetensors, tokenizer, model card).

From the official package's hub folder, the folder's config.json and preprocessor_config.json give
the model's settings (objectness threshold, ``rms_norm_eps``, frames, vocabulary, sizes: see
``models.grove.hub_config``); a config that sets one of them otherwise is an error naming both values,
unless ``--override-hub-config`` (every key) or ``--override-hub-config KEY ...`` (those keys: the
config's key or the folder's) lets the config win, with a warning.
"""
from __future__ import annotations

from core.cli_args import existing_file, existing_path
from core.command_parser import CommandParser
from core.weights import WeightFileError

import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", role="input", type=existing_path,
                        help="official .bin (zero_to_fp32) or Hugging Face folder")
    parser.add_argument("--config", role="input", action="append", required=True, type=existing_file,
                        help="cli.py config(s) describing the model, stacked as cli.py does")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="check keys and shapes only")
    mode.add_argument("--out", role="output", help="write the converted Lightning checkpoint here")
    mode.add_argument("--export", role="output", help="write an exported model folder here (grove export)")
    parser.add_argument("--override-hub-config", nargs="*", metavar="KEY", default=None,
                        help="a hub folder: the config wins over the folder's config.json for these keys "
                             "(every key when none is named), with a warning")
    args = parser.parse_args(argv)
    from models.grove.convert_official import check_official, convert_official_file
    from models.grove.hub_config import HubConfigMismatch

    override = False if args.override_hub_config is None else (args.override_hub_config or True)
    try:
        if args.check:
            report, notes = check_official(args.checkpoint, args.config, override)
        elif args.out:
            report, notes = convert_official_file(args.checkpoint, args.config, args.out, override)
        else:
            report, notes = convert_and_export(args.checkpoint, args.config, args.export, override)
    except (WeightFileError, FileNotFoundError, HubConfigMismatch) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for note in notes:
        print(f"note: {note}")
    print(report.table())
    if report.ok and (args.out or args.export):
        print(f"wrote {args.out or args.export}")
    return 0 if report.ok else 1


def convert_and_export(checkpoint: str, configs: list[str], folder: str, override=False):
    """Convert, then export the converted weights as a folder (the intermediate checkpoint is removed);
    a hub folder's settings are one more config over ``configs`` (``models.grove.hub_config``)."""
    import tempfile

    import yaml

    from command_line.model_export import export
    from models.grove.convert_official import convert_official_file, hub_layer

    Path(folder).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=Path(folder).parent) as tmp:
        converted = Path(tmp) / "converted.ckpt"
        report, notes = convert_official_file(checkpoint, configs, converted, override)
        layer, _ = hub_layer(checkpoint, configs, override)
        stacked = list(configs)
        if layer:
            (Path(tmp) / "hub_config.yaml").write_text(yaml.safe_dump(layer), encoding="utf-8")
            stacked.append(str(Path(tmp) / "hub_config.yaml"))
        notes = [n for n in notes if not n.startswith("a Lightning checkpoint carries")]
        if report.ok:
            export(stacked, str(converted), folder, name=f"GROVE (converted from {Path(checkpoint).name})")
    return report, notes
