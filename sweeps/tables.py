"""The sweep's tables: the points' test metrics as Markdown (scaled x100, chosen columns) and CSV (all)."""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Sequence

# Table 5's columns, then the rest of the headline metrics.
DEFAULT_COLUMNS = ("METEOR", "CIDEr", "AP50", "recall", "mIoU", "CAPTURE")


def _shown(value: Any) -> str:
    return f"{100 * value:.1f}" if isinstance(value, (int, float)) else "-"


def tabulate(results: Sequence[dict[str, Any]], columns: Sequence[str] = DEFAULT_COLUMNS) -> tuple[str, str]:
    """(Markdown, CSV) of the points' test metrics. Markdown shows ``columns`` x100; CSV every metric as is."""
    md = ["| point | arguments | " + " | ".join(columns) + " |", "|---|---|" + "---|" * len(columns)]
    for r in results:
        args = " ".join(Path(a).stem if a.endswith(".yaml") else a for a in r["args"] if a != "--config")
        if r.get("error"):
            md.append(f"| {r['name']} | {args or '(base)'} | failed: {r['error'].splitlines()[-1][:80]} |"
                      + " |" * (len(columns) - 1))
        else:
            md.append(f"| {r['name']} | {args or '(base)'} | "
                      + " | ".join(_shown(r["metrics"].get(c)) for c in columns) + " |")
    md.append("")
    md.append("Test metrics x100 (" + ", ".join(columns) + "); every metric unscaled in results.csv.")
    all_metrics = sorted({m for r in results for m in r.get("metrics", {})})
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["point", "arguments", *all_metrics, "error"])
    for r in results:
        writer.writerow([r["name"], " ".join(r["args"]), *(r.get("metrics", {}).get(m, "") for m in all_metrics),
                         (r.get("error") or "").splitlines()[-1] if r.get("error") else ""])
    return "\n".join(md) + "\n", buf.getvalue()
