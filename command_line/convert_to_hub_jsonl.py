"""Write annotations in the Hugging Face hub's JSONL layout of HowToGround1M / iGround.

    grove convert-hub-jsonl ANNOTATIONS OUT.jsonl [--keys-companion] [--processed]

ANNOTATIONS: any layout the project reads (JSON, pickle, per-key folder, JSONL). ``--keys-companion``
leaves the ids out of the rows and writes them to ``OUT_keys.jsonl``, as HowToGround1M's
configurations ship; without it the rows carry ``video_id`` and ``clip_id``, as iGround's files
do. ``--processed`` merges the instances of a phrase in a frame into one union box (iGround's
"processed" files; evaluation reads the "raw" ones). For testing the hub readers end to end on
data you have (docs/reproduce.md uses it on the synthetic set).
"""
from __future__ import annotations

from core.cli_args import existing_path
from core.command_parser import CommandParser

from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("annotations", role="input", type=existing_path,
                        help="annotation file or folder, any layout the project reads")
    parser.add_argument("out", role="output", help="the .jsonl file to write")
    parser.add_argument("--keys-companion", action="store_true",
                        help="ids in OUT_keys.jsonl, one per line (HowToGround1M's layout)")
    parser.add_argument("--processed", action="store_true", help="one union box per phrase and frame")
    args = parser.parse_args(argv)
    if not args.out.endswith(".jsonl"):
        parser.error(f"argument out: {args.out}: the output must be a .jsonl file")

    from datamodules.howtoground import merge_instances
    from formats.hub_jsonl import write_jsonl_records
    from formats.records import RecordError, read_records

    try:
        records = read_records(args.annotations)
    except (RecordError, ValueError, FileNotFoundError) as err:
        raise SystemExit(f"error: {err}") from None
    if args.processed:
        records = [merge_instances(r) for r in records]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_jsonl_records(records, args.out, keys_companion=args.keys_companion)
    companion = f" and its keys in {args.out[:-len('.jsonl')]}_keys.jsonl" if args.keys_companion else ""
    print(f"wrote {len(records)} clips to {args.out}{companion}")
    return 0
