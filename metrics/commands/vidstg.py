"""``grove vidstg``: VidSTG m_vIoU and vIoU@R per sentence type (:mod:`metrics.protocols.vidstg`)."""
from __future__ import annotations

import core  # noqa: F401
from core.command_parser import CommandParser

from typing import Mapping, Sequence

from metrics.protocols.vidstg import GRIDS, evaluate_vidstg, evaluate_vidstg_sentences, predicted_boxes


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = CommandParser(description="VidSTG evaluation: m_vIoU, vIoU@0.3/0.5 per sentence type.")
    parser.add_argument("--annotations", role="input", required=True,
                        help="VidSTG file (VidSTG's own or TubeDETR's layout)")
    parser.add_argument("--vidor-annotations", role="input", default=None,
                        help="VidOR annotation folder (VidSTG's own layout)")
    parser.add_argument("--segment", default="tube", choices=("tube", "used"),
                        help="the clips the predictions were made on: the GT tube (default) or the used segment "
                             "(with --grid record, the frames evaluated)")
    parser.add_argument("--grid", default="tubedetr", choices=GRIDS,
                        help="'tubedetr' (default: TubeDETR's 5-fps grid over the used segment, boxes of every "
                             "tube frame read from the file) or 'record' (the project's annotation grid)")
    parser.add_argument("--pred", role="input", required=True,
                        help="predictions JSON (the format predict writes; optional 'span' per sentence)")
    parser.add_argument("--out", role="output", default=None, help="write the report as JSON here")
    args = parser.parse_args(argv)
    from core.output_files import write_json_atomic

    from datamodules.vidstg import read_vidstg
    from formats.predictions import load_predictions
    from metrics.protocols.vidstg_annotations import read_vidstg_sentences

    preds = load_predictions(args.pred)
    if args.grid == "tubedetr":
        sentences = read_vidstg_sentences(args.annotations, args.vidor_annotations)
        boxes = {s.key: predicted_boxes(preds.get(s.key), s.key, str(args.pred)) for s in sentences}
        spans = {k: p["span"] for k, p in preds.items() if isinstance(p, Mapping) and p.get("span") is not None}
        report = evaluate_vidstg_sentences(sentences, boxes, spans)
        known = {s.key for s in sentences}
    else:
        records = read_vidstg(args.annotations, args.vidor_annotations, args.segment, grid="project")
        report = evaluate_vidstg(records, preds, source=str(args.pred), grid="record")
        known = {r.key for r in records}
    missing = sum(1 for k in known if k not in preds)
    for name, value in report.items():
        print(f"{name:<40} {value:.0f}" if name.startswith("num_") else f"{name:<40} {value:.4f}")
    if missing:
        print(f"sentences without a prediction (scored as empty): {missing}")
    if report.get("num_pred_frames_missing"):
        print(f"ground-truth frames without a predicted box (IoU 0): {report['num_pred_frames_missing']:.0f}"
              + (" (predictions are not on TubeDETR's grid?)" if args.grid == "tubedetr" else ""))
    ignored = sum(1 for k in preds if k not in known)
    if ignored:
        print(f"predicted sentences not in the annotations (ignored): {ignored}")
    if args.out:
        write_json_atomic(args.out, {"metrics": report, "missing_predictions": missing})
    return report

