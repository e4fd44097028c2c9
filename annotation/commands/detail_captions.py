"""``grove annotate detail-captions``: detail captions (CAPTURE paper, sec. 4.1) of images, frame
folders or videos, written as one JSON file (the caption and every stage's output per image).

Images: ``.jpg``/``.jpeg``/``.png``; a folder of frame images; a video (``.mp4``/``.webm``/``.mkv``),
of which ``frames_per_video`` uniformly spaced frames are captioned (keys ``{video}#{frame}``).
"""
from __future__ import annotations

from core.output_files import write_json_atomic

from pathlib import Path

import numpy as np
import yaml

IMAGES = {".jpg", ".jpeg", ".png"}
VIDEOS = {".mp4", ".webm", ".mkv"}


def load_detail_config(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config {path} does not exist")
    with path.open() as handle:  # read from the file: a YAML syntax error names it with its line
        data = yaml.safe_load(handle) or {}
    unknown = sorted(set(data) - {"detail_captions", "llm", "frames_per_video"})
    if unknown:
        raise ValueError(f"{path}: unknown section '{unknown[0]}' (sections: detail_captions, llm, frames_per_video)")
    if not isinstance(data.get("detail_captions"), dict):
        raise ValueError(f"{path}: a 'detail_captions' section (the five stages' models and options) is required")
    return data


def read_inputs(inputs: list[str | Path], frames_per_video: int = 4) -> list[tuple[str, np.ndarray]]:
    """``(key, RGB uint8 image)`` for every image, frame-folder image and sampled video frame."""
    from PIL import Image

    out = []
    for item in inputs:
        item = Path(item)
        if item.is_dir():
            files = sorted(p for p in item.iterdir() if p.suffix.lower() in IMAGES)
            out += [(str(p), np.asarray(Image.open(p).convert("RGB"))) for p in files]
        elif item.suffix.lower() in IMAGES:
            out.append((str(item), np.asarray(Image.open(item).convert("RGB"))))
        elif item.suffix.lower() in VIDEOS:
            from formats.video_files import open_video

            with open_video(item.parent, item.name) as source:
                idx = np.unique(np.linspace(0, source.num_frames - 1, max(1, frames_per_video)).round().astype(int))
                out += [(f"{item}#{i}", frame) for i, frame in zip(idx, source.read_frames(idx))]
        else:
            raise ValueError(f"{item}: not an image ({', '.join(sorted(IMAGES))}), a folder of them or a video "
                             f"({', '.join(sorted(VIDEOS))})")
    return out


def run_detail_captions(config_path: str | Path, inputs: list[str | Path], out: str | Path,
                        frames_per_video: int | None = None, captioner=None) -> dict:
    """Caption every input; ``captioner`` replaces the one the config builds (tests)."""
    config = load_detail_config(config_path)
    images = read_inputs(inputs, int(frames_per_video or config.get("frames_per_video", 4)))
    if captioner is None:
        from annotation.stage1.detail_caption_models import build_detail_captioner

        captioner = build_detail_captioner(config["detail_captions"], config.get("llm"))
    results = captioner.run([im for _, im in images]) if images else []
    data = {"config": str(config_path), "captions": {k: r.to_dict() for (k, _), r in zip(images, results)}}
    write_json_atomic(out, data)
    return data
