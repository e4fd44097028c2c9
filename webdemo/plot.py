"""Each phrase's objectness over the clip's time, with the threshold that decides which boxes are kept."""
from __future__ import annotations

from core.drawing import phrase_colours

from typing import Any, Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure


def objectness_figure(objectness: Mapping[str, Any] | None, phrases: Sequence[str], fps: float,
                      threshold: float) -> Figure:
    """A line per phrase (its drawing colour) of ``sigmoid(objectness)`` against seconds, and a dashed
    line at ``threshold``: where a phrase's line is under it, its box is left out of that frame.

    ``objectness`` is ``{"frames": source-frame indices, "scores": one row per frame, one column per phrase}``.
    """
    figure = Figure(figsize=(7.0, 2.8), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    frames = np.asarray((objectness or {}).get("frames", []), dtype=np.float64)
    scores = np.asarray((objectness or {}).get("scores", []), dtype=np.float64)
    scores = scores.reshape(len(frames), -1) if scores.size else np.zeros((len(frames), 0))
    colours = phrase_colours(phrases)
    seconds = frames / fps
    for column, phrase in enumerate(phrases[:scores.shape[1]]):
        axes.plot(seconds, scores[:, column], color=np.array(colours[phrase]) / 255.0, label=phrase,
                  linewidth=2, marker="o", markersize=3)
    axes.axhline(threshold, color="0.35", linestyle="--", linewidth=1.2, label=f"threshold {threshold:.2f}")
    axes.set_ylim(-0.02, 1.02)
    if len(seconds):
        axes.set_xlim(seconds.min(), max(seconds.max(), seconds.min() + 1e-3))
    axes.set_xlabel("time (s)")
    axes.set_ylabel("objectness")
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return figure
