"""The synthetic generator's masks: each box's mask is exactly the object's visible pixels, by a loop
rasterisation that shares nothing with the generator but the shape templates, and the rendered frame
shows the object's colour on every one of them."""
from __future__ import annotations

import numpy as np

from datamodules.synthetic_scenes import COLOURS, render_frames
from formats.mask_rle import decode_masks, mask_boxes
from formats.records import GroundedRecord
from tests.datamodules.test_synthetic import reference_masks, scenes


def test_masks_are_the_visible_pixels_of_each_drawn_shape():
    checked = occluded = 0
    for scene, record in scenes(12):
        assert record.masks is not None and [len(m) for m in record.masks] == [len(b) for b in record.bboxes]
        frames = render_frames(scene, record.frame_indices)
        by_phrase = {o.phrase: k for k, o in enumerate(scene.objects)}
        for i, frame in enumerate(record.frame_indices):
            if not record.labels[i]:
                continue
            visible, _, own, _ = reference_masks(scene, frame)
            decoded = decode_masks(record.masks[i])
            assert decoded.shape == (len(record.labels[i]), scene.height, scene.width)
            for j, phrase in enumerate(record.labels[i]):
                k = by_phrase[phrase]
                np.testing.assert_array_equal(decoded[j], visible[k], err_msg=f"{record.key} frame {frame} {phrase}")
                assert (frames[i][decoded[j]] == COLOURS[scene.objects[k].colour]).all()
                occluded += int((own[k] & ~visible[k]).any())
                checked += 1
            # the masks' tight boxes are the record's boxes
            np.testing.assert_array_equal(mask_boxes(record.masks[i]), record.bboxes[i])
    assert checked > 50 and occluded > 0  # the wall or a nearer object covers part of some shapes


def test_masks_survive_the_record_round_trip():
    _, record = next(scenes(1))
    again = GroundedRecord.from_dict(record.to_dict(), source="round trip")
    assert again.masks == record.masks
