"""The one drawing code of the project: colours per phrase, labelled boxes, caption band, blending."""
from core.drawing import (
    CAPTION_ALPHA,
    LABEL_ALPHA,
    MASK_ALPHA,
    PALETTE,
    composite,
    draw_boxes,
    mask_layer,
    mask_outline,
    over,
    phrase_colours,
    render_overlay,
)

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


def _disc(height, width, cy, cx, r):
    yy, xx = np.mgrid[:height, :width]
    return (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r


def test_mask_outline_is_the_ring_inside_the_edge():
    square = np.zeros((9, 9), bool)
    square[2:7, 2:7] = True
    ring = square.copy()
    ring[3:6, 3:6] = False
    np.testing.assert_array_equal(mask_outline(square, 1), ring)  # 16 pixels
    thick = square.copy()
    thick[4, 4] = False  # only the centre is two steps from the edge
    np.testing.assert_array_equal(mask_outline(square, 2), thick)
    at_border = np.ones((4, 6), bool)  # the frame's border is outside the mask
    expected = np.ones((4, 6), bool)
    expected[1:3, 1:5] = False
    np.testing.assert_array_equal(mask_outline(at_border, 1), expected)


def test_mask_layer_fills_translucent_and_outlines_opaque():
    colour = (60, 180, 75)
    mask = _disc(40, 50, 20, 25, 10)
    layer = mask_layer(50, 40, [None, mask], [(1, 2, 3), colour], outline_width=1)
    edge = mask_outline(mask, 1)
    assert (layer[mask & ~edge] == (*colour, MASK_ALPHA)).all()
    assert (layer[edge] == (*colour, 255)).all()
    assert (layer[~mask] == 0).all()  # a None mask draws nothing
    with pytest.raises(ValueError, match=r"mask 0 is 49x40 .* the frame 50x40"):
        mask_layer(50, 40, [np.zeros((40, 49), bool)], [colour])


@pytest.mark.parametrize("seed", range(3))
def test_over_blends_like_two_composites(seed):
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, (2, 6, 8, 3), dtype=np.uint8)
    top, bottom = rng.integers(0, 256, (2, 6, 8, 4), dtype=np.uint8)
    top[0, :, 3], top[1, :, 3] = 0, 255
    bottom[..., 3] = np.maximum(bottom[..., 3], 1)
    bottom[2:4, :4, 3] = 0  # transparent underneath: the top as it is
    both = over(top, bottom)
    np.testing.assert_array_equal(both[2:4, :4], top[2:4, :4])
    two_steps = composite(composite(frames, bottom), top).astype(int)
    assert np.abs(composite(frames, both).astype(int) - two_steps).max() <= 1  # rounding once, not twice
    np.testing.assert_array_equal(both[0], bottom[0])  # transparent on top: the bottom, exactly
    np.testing.assert_array_equal(both[1], top[1])  # opaque on top: the top, exactly


def test_masks_lie_under_the_box_and_label_and_blend_translucent():
    colour = (245, 130, 48)
    box = np.array([[20, 30, 90, 70]])
    mask = np.zeros((80, 120), bool)
    mask[25:75, 15:95] = True  # reaches beyond the box: under its outline and its label
    plain = render_overlay(120, 80, box, ["a cup"], {"a cup": colour}, line_width=2, font_size=10)
    masked = render_overlay(120, 80, box, ["a cup"], {"a cup": colour}, line_width=2, font_size=10, masks=[mask])
    label = plain[..., 3] == LABEL_ALPHA
    outline = plain[..., 3] == 255
    assert label[25:30].any() and outline[30, 20:90].all()
    frame = np.full((1, 80, 120, 3), 40, np.uint8)
    ours = composite(frame, masked)[0].astype(int)
    # where the box or label is drawn, it covers the mask: the same as the mask blended first, then them
    layered = composite(composite(frame, mask_layer(120, 80, [mask], [colour])), plain)[0].astype(int)
    assert np.abs(ours - layered).max() <= 1
    np.testing.assert_array_equal(ours[outline], np.broadcast_to(colour, ours[outline].shape))
    # inside the mask, away from box, label and contour: the colour at MASK_ALPHA over the frame
    expected = np.round((np.array(colour) * MASK_ALPHA + 40 * (255 - MASK_ALPHA)) / 255)
    np.testing.assert_array_equal(ours[50, 50], expected)
    np.testing.assert_array_equal(ours[50, 16], expected)  # outside the box, still inside the mask
    assert (ours[5, 5] == 40).all() and (ours[78, 110] == 40).all()  # outside the mask: the frame
    assert (ours[74, 50] == colour).all()  # the mask's bottom edge: its opaque contour


def test_frames_without_masks_are_drawn_as_without_the_masks_key():
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (2, 60, 90, 3), dtype=np.uint8)
    boxes = np.array([[5, 10, 40, 50], [30, 20, 85, 55]])
    colours = phrase_colours(["a", "b"])
    base = draw_boxes(frames, boxes, ["a", "b"], colours, caption="a and b", scores=[0.5, 0.75])
    for masks in (None, [None, None]):
        out = draw_boxes(frames, boxes, ["a", "b"], colours, caption="a and b", scores=[0.5, 0.75], masks=masks)
        assert out.tobytes() == base.tobytes()
    # the overlay alone: boxes, labels and caption only, nothing where none of them is
    overlay = render_overlay(90, 60, boxes, ["a", "b"], colours, "a and b", masks=[None, None])
    assert overlay[..., 3].min() == 0 and (overlay[overlay[..., 3] == 0] == 0).all()
    with pytest.raises(ValueError, match="1 masks for 2 boxes"):
        render_overlay(90, 60, boxes, ["a", "b"], colours, masks=[np.ones((60, 90), bool)])
