"""``grove webdemo`` whose predictions carry a mask per box, at places the browser test knows.

The caption is fixed as in :mod:`tests.webdemo.fixed_caption_server`; then every real frame of every
clip gets one box of the caption's first phrase, :func:`known_box`, with the disc :func:`known_mask`
as its mask (COCO RLE, the frame's size), in place of the tiny model's random boxes. Everything
downstream (the predictions file, the annotated MP4, the frame view) is the demo's own.
"""
import core  # noqa: F401

import sys

import numpy as np

import lightning_modules.grove_module as grove_module
from formats.mask_rle import encode_masks
from models.grove import Grove
from tests.webdemo.fixed_caption_server import fixed_generate_captions


def known_box(width: int, height: int) -> list[float]:
    return [0.2 * width, 0.2 * height, 0.8 * width, 0.8 * height]


def known_mask(width: int, height: int) -> np.ndarray:
    """A disc at the frame's centre, inside :func:`known_box`."""
    yy, xx = np.mgrid[:height, :width]
    radius = 0.2 * min(width, height)
    return (yy - height / 2) ** 2 + (xx - width / 2) ** 2 <= radius ** 2


def with_known_masks(real_predict_clips):
    def predict_clips(model, batch, **settings):
        result = real_predict_clips(model, batch, **settings)
        frame_indices = batch["frame_indices"].cpu().numpy()
        real = batch["frame_mask"].cpu().numpy().astype(bool)
        for i, key in enumerate(batch["keys"]):
            prediction = result["predictions"][key]
            width, height = (int(v) for v in batch["size"][i].tolist())
            rle = encode_masks(known_mask(width, height))[0]
            prediction["frames"] = [{"frame": int(f), "boxes": [known_box(width, height)],
                                     "labels": [prediction["phrases"][0]], "scores": [0.9], "masks": [rle]}
                                    for f in frame_indices[i][real[i]]]
        return result

    return predict_clips


if __name__ == "__main__":
    Grove.generate_captions = fixed_generate_captions
    grove_module.predict_clips = with_known_masks(grove_module.predict_clips)
    from webdemo.__main__ import main

    main(sys.argv[1:])
