"""The one drawing code of the project: colours per phrase, labelled boxes, caption band, blending."""
from core.drawing import CAPTION_ALPHA, LABEL_ALPHA, PALETTE, composite, phrase_colours, render_overlay

import numpy as np
import pytest


@pytest.mark.parametrize("seed", range(3))
def test_composite_equals_float_alpha_blend(seed):
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, (3, 7, 5, 3), dtype=np.uint8)
    overlay = rng.integers(0, 256, (7, 5, 4), dtype=np.uint8)
    overlay[0, 0, 3], overlay[0, 1, 3] = 0, 255
    a = overlay[..., 3:4] / 255.0
    expected = np.round(frames * (1 - a) + overlay[..., :3] * a).astype(np.uint8)
    out = composite(frames, overlay)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(out[:, 0, 0], frames[:, 0, 0])  # transparent: untouched
    assert (out[:, 0, 1] == overlay[0, 1, :3]).all()  # opaque: the overlay's colour


def test_phrase_colours_by_first_appearance():
    colours = phrase_colours(["b", "a", "b", "c"])
    assert colours == {"b": PALETTE[0], "a": PALETTE[1], "c": PALETTE[2]}
    many = phrase_colours([str(i) for i in range(len(PALETTE) + 1)])
    assert many[str(len(PALETTE))] == PALETTE[0]  # the palette cycles


def test_render_overlay_outlines_the_box_and_labels_it():
    colour = (230, 25, 75)
    ov = render_overlay(100, 80, np.array([[10, 30, 50, 70]]), ["a cup"], {"a cup": colour},
                        caption="a person holds a cup", line_width=2, font_size=10)
    assert ov.shape == (80, 100, 4) and ov.dtype == np.uint8
    edge = np.concatenate([ov[30, 10:50], ov[31, 10:50], ov[69, 10:50], ov[30:70, 10], ov[30:70, 49], ov[30:70, 48]])
    assert (edge == [*colour, 255]).all()
    assert ov[45, 30, 3] == 0 and ov[40, 20, 3] == 0  # inside the box: transparent
    assert ov[5, 90, 3] == 0  # far from everything
    above = ov[:30, 10:50, 3]
    assert (above == LABEL_ALPHA).any()  # the label sits just above the box
    assert ov[79, 95, 3] == CAPTION_ALPHA and ov[79, 95, :3].tolist() == [0, 0, 0]  # caption band (under the box)


def test_render_overlay_writes_each_score_after_its_label():
    colour = (0, 130, 200)
    boxes = np.array([[10, 40, 60, 70]])
    plain = render_overlay(120, 80, boxes, ["a cup"], {"a cup": colour}, line_width=2, font_size=10)
    scored = render_overlay(120, 80, boxes, ["a cup"], {"a cup": colour}, line_width=2, font_size=10, scores=[0.87])
    # the label band grows to the right by the width of " 0.87" and keeps the phrase's colour
    band = lambda ov: np.nonzero((ov[:40, :, 3] == LABEL_ALPHA).any(axis=0))[0]  # noqa: E731
    assert band(scored).max() > band(plain).max()
    assert band(scored).min() == band(plain).min() == 10
    np.testing.assert_array_equal(scored[40, 10:60], plain[40, 10:60])  # the outline is the same
