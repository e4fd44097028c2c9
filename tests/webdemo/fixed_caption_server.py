"""``grove webdemo`` with the model's generated caption fixed to :data:`FIXED_CAPTION`.

The browser test's tiny randomly initialised model writes captions that rarely tag a phrase; with
this caption the page must show two phrases in two colours, and everything after the caption
(grounding on every frame, objectness, drawing, the predictions file) is the model's own.
"""
import core  # noqa: F401

import sys

from models.grove import Grove

FIXED_CAPTION = "a <p> red shape </p> [DET] moves next to <p> the wall </p> [DET]"
FIXED_PLAIN = "a red shape moves next to the wall"


def fixed_generate_captions(self, global_frames, max_new_tokens=64, video_embeds=None) -> list[str]:
    return [FIXED_CAPTION] * len(global_frames)


if __name__ == "__main__":
    Grove.generate_captions = fixed_generate_captions
    from webdemo.__main__ import main

    main(sys.argv[1:])
