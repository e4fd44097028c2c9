"""Check (or convert) a released CoTracker3 offline checkpoint for this project.

    grove convert-cotracker3 scaled_offline.pth --check
    grove convert-cotracker3 scaled_offline.pth --out cotracker3_offline.safetensors

``--check`` builds the model on the meta device and prints what every key became (the file is read
with the project's safe loader: tensors only, no code run); both modes exit with status 1 naming
each unaccounted key, missing tensor or shape mismatch. The annotation pipeline's ``cotracker``
Stage 3 backend reads either file (``stage3.path``).
"""
from __future__ import annotations

from core.cli_args import existing_file
from core.command_parser import CommandParser
from core.weights import WeightFileError

import sys


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", role="input", type=existing_file,
                        help="the released scaled_offline.pth (or a CoTracker3 offline state dict)")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="check keys and shapes only")
    mode.add_argument("--out", role="output", help="write the weights in the project's layout as .safetensors")
    args = parser.parse_args(argv)
    from models.cotracker3.convert_official import check_cotracker3, load_cotracker3

    try:
        report, cfg = check_cotracker3(args.checkpoint)
        print(report.table())
        print(f"model: window {cfg.window_len}, {cfg.num_virtual_tracks} virtual tracks, width {cfg.hidden_size}, "
              f"{cfg.time_depth} time / {cfg.space_depth} space blocks")
        if report.ok and args.out:
            from safetensors.torch import save_file

            model = load_cotracker3(args.checkpoint, cfg)
            save_file({k: v.contiguous() for k, v in model.state_dict().items()}, args.out)
            print(f"wrote {args.out}")
    except (WeightFileError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0 if report.ok else 1
