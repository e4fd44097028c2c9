"""Export a trained model (GROVE or the VC-Inspector judge) as a self-contained Hugging Face-style folder.

    grove export --config configs/demo.yaml --ckpt-path runs/demo/.../last.ckpt --out exported/demo
    grove export --config configs/judge_demo.yaml \
        --ckpt-path runs/judge_demo/checkpoints/last.ckpt --out exported/judge_demo

The config's model class decides which: a GroveModule writes a :class:`models.grove.Grove` folder, a
JudgeModule a :class:`judge.model.vc_inspector.VCInspectorJudge` folder (config.json, model.safetensors or
shards with an index, tokenizer, preprocessing config, README.md model card). Nothing the model
was initialised from (CLIP, SAM, GLaMM, the LLM folder, the judge's vision tower) is read.
``--metrics`` takes a JSON of test metrics (``{"metrics": {...}}`` as ``make demo`` writes, or a
flat mapping) for the model card. Further ``--key=value`` arguments override the config as on
``cli.py``. The folder then loads with ``Grove.from_pretrained(DIR)`` (or ``VCInspectorJudge``), and
``cli.py predict/test`` take it as ``--ckpt_path DIR``, ``grove webdemo`` and ``grove judge``
as ``--ckpt-path DIR``.
The library behind this entry point is :mod:`command_line.model_export`.
"""
from __future__ import annotations

import core  # noqa: F401
from core.cli_args import byte_size, json_file
from core.command_parser import CommandParser


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", role="input", action="append", required=True,
                        help="the config(s) the model was trained with")
    parser.add_argument("--ckpt-path", role="input", required=True,
                        help="a .ckpt of cli.py fit (or a converted release)")
    parser.add_argument("--out", role="output", required=True, help="the folder to write")
    parser.add_argument("--metrics", role="input", type=json_file, default=None,
                        help="JSON of test metrics for the model card")
    parser.add_argument("--name", default=None, help="the model card's title")
    parser.add_argument("--max-shard-size", type=byte_size, default=None,
                        help="shard the weights above this size (e.g. 5GB)")
    parser.add_argument("--overwrite", action="store_true",
                        help="write into a non-empty folder this command did not write (same-named files replaced)")
    args, overrides = parser.parse_known_args(argv)
    from core.folder_lock import FolderInUseError
    from core.output_folder import OutputFolderError

    from command_line.model_export import export

    try:
        out = export(args.config, args.ckpt_path, args.out, overrides, args.metrics,
                     args.max_shard_size, args.name, args.overwrite)
    except (OutputFolderError, FolderInUseError) as err:
        parser.error(str(err))
    for path in sorted(p for p in out.iterdir() if not p.name.startswith(".")):
        print(f"{path.stat().st_size:>12,d}  {path}")
    return 0
