"""The objectness plot: one line per phrase in its drawing colour, and the threshold line."""
from core.drawing import PALETTE

import numpy as np
import pytest
from matplotlib.colors import to_rgb

from webdemo.plot import objectness_figure


@pytest.mark.parametrize("seed", range(3))
def test_each_phrase_is_a_line_of_its_scores_over_seconds(seed):
    rng = np.random.default_rng(seed)
    frames = np.arange(0, 200, 5) + int(rng.integers(0, 100))
    scores = rng.random((len(frames), 3))
    phrases = ["a cup", "a knife", "a cup"]
    fps = float(rng.choice([24.0, 25.0, 30.0]))
    threshold = float(rng.random())
    figure = objectness_figure({"frames": frames.tolist(), "scores": scores.tolist()}, phrases, fps, threshold)
    axes = figure.axes[0]
    curves = [line for line in axes.lines if line.get_label() in phrases]
    assert [c.get_label() for c in curves] == phrases
    for column, curve in enumerate(curves):
        np.testing.assert_allclose(curve.get_xdata(), frames / fps)
        np.testing.assert_allclose(curve.get_ydata(), scores[:, column])
    assert to_rgb(curves[0].get_color()) == pytest.approx(np.array(PALETTE[0]) / 255)
    assert to_rgb(curves[1].get_color()) == pytest.approx(np.array(PALETTE[1]) / 255)
    assert to_rgb(curves[2].get_color()) == to_rgb(curves[0].get_color())  # the same phrase, the same colour
    (line,) = [line for line in axes.lines if line.get_label().startswith("threshold")]
    assert line.get_linestyle() == "--"
    np.testing.assert_allclose(line.get_ydata(), [threshold, threshold])
    assert line.get_label() == f"threshold {threshold:.2f}"


def test_no_phrases_still_shows_the_threshold():
    figure = objectness_figure({"frames": [0, 5], "scores": [[], []]}, [], 25.0, 0.5)
    labels = [line.get_label() for line in figure.axes[0].lines]
    assert labels == ["threshold 0.50"]
    figure = objectness_figure(None, [], 25.0, 0.3)
    assert [line.get_label() for line in figure.axes[0].lines] == ["threshold 0.30"]
