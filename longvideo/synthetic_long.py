"""Long synthetic videos with true identities: objects persist across clips, leave and come back, new
ones appear, and look-alikes (same colour and shape) share the stage.

The built-in synthetic clips (:mod:`datamodules.synthetic_scenes`) last 8 s and each object lives
in one clip only; a long video needs identities that outlive clips. Here a video has a pool of
objects (shapes and colours of the built-in set, over the same kind of background and wall);
each object gets a schedule of visits (enter, wander with a smooth random walk bouncing off the
frame's edges, leave), with absences between them, so across the video's clips an object is seen,
missed, and seen again, later objects join, and two objects may look the same. Frames are drawn
and encoded chunk by chunk, so a one-hour video needs no more memory than a one-minute one.

The ground truth (``<name>.json``) gives every object's id and phrase, and on every frame of the
5-fps grid the visible objects' ids and tight boxes (exact, as the built-in generator computes
them: visible pixels only, the wall and nearer objects removed). ``<name>_clips.json`` holds the
same boxes as one captioned record per clip long-video predict cuts (:mod:`longvideo.clip_records`).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from datamodules.synthetic_scenes import (
    COLOURS,
    SHAPES,
    SceneObject,
    SyntheticConfig,
    SyntheticScene,
    Wall,
    _background,
    _count_owned,
    _visible_threshold,
    fit_tight_boxes,
    render_frames,
    render_owners,
)
from formats.frame_grids import annotation_grid
from formats.video_writer import VideoWriter
from longvideo.clip_records import write_clip_records


@dataclass(frozen=True)
class LongVideoConfig:
    """What determines a long synthetic video (stored in its ground truth)."""

    duration_s: float = 120.0
    fps: float = 30.0
    width: int = 640
    height: int = 360
    num_objects: int = 6            # identities over the whole video
    look_alikes: int = 1            # of them, this many copy another's colour and shape
    visit_s: tuple[float, float] = (6.0, 30.0)    # how long a visit lasts
    absence_s: tuple[float, float] = (4.0, 40.0)  # how long an object stays away between visits
    speed: float = 40.0             # pixels per second of the random walk
    object_size: tuple[int, int] = (28, 56)
    seed: int = 0
    crf: int = 23
    preset: str = "ultrafast"

    @property
    def num_frames(self) -> int:
        return int(round(self.duration_s * self.fps))


def _walk(rng: np.random.Generator, n: int, fps: float, speed: float, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``(n, 2)`` positions of a smooth random walk reflected into ``[lo, hi]``."""
    heading = rng.uniform(0, 2 * np.pi) + np.cumsum(rng.normal(0, 0.08, n))
    step = speed / fps * np.stack([np.cos(heading), np.sin(heading)], 1)
    span = hi - lo
    raw = rng.uniform(lo, hi) - lo + np.cumsum(step, 0)
    folded = np.mod(raw, 2 * span)  # reflection at both edges
    return lo + np.where(folded > span, 2 * span - folded, folded)


def sample_long_scene(config: LongVideoConfig) -> tuple[SyntheticScene, list[int]]:
    """The scene of a long video (background, wall, and each object's centre in every frame, off-frame
    while it is away) and the identity of each of its objects, in drawing order."""
    rng = np.random.default_rng([int(config.seed), 7])
    n, fps = config.num_frames, config.fps
    thickness = int(rng.integers(32, 41))
    vertical = bool(rng.integers(2))
    extent = config.width if vertical else config.height
    start = int(rng.integers(extent // 3, 2 * extent // 3 - thickness))
    wall = Wall(vertical, start, start + thickness)
    background = _background(rng, config.width, config.height, wall)
    kinds = [(c, s) for c in COLOURS for s in SHAPES]
    distinct = config.num_objects - config.look_alikes
    chosen = [kinds[i] for i in rng.choice(len(kinds), size=distinct, replace=False)]
    chosen += [chosen[int(rng.integers(distinct))] for _ in range(config.look_alikes)]
    objects = []
    far = np.array([-10.0 * config.width, -10.0 * config.height])  # clamped into the margin: never visible
    for k, (colour, shape) in enumerate(chosen):
        size = int(rng.integers(config.object_size[0], config.object_size[1] + 1))
        lo = np.array([size / 2.0, size / 2.0])
        hi = np.array([config.width - size / 2.0, config.height - size / 2.0])
        centres = np.repeat(far[None], n, axis=0)
        # the first objects are there from the start; the others join later (new objects appear)
        t = 0.0 if k < max(1, config.num_objects // 2) else rng.uniform(0.1, 0.6) * config.duration_s
        while t < config.duration_s:
            length = rng.uniform(*config.visit_s)
            a, b = int(t * fps), min(n, int((t + length) * fps))
            if b > a:
                centres[a:b] = _walk(rng, b - a, fps, config.speed, lo, hi)
            t += length + rng.uniform(*config.absence_s)
        objects.append(SceneObject(colour, shape, size, "moves", "", bool(rng.integers(2)), centres))
    order = sorted(range(len(objects)), key=lambda k: not objects[k].behind_wall)  # drawing order
    return SyntheticScene(config.width, config.height, fps, n, background, wall, [objects[k] for k in order]), order


def ground_truth_chunk(scene: SyntheticScene, identities: list[int], frames: np.ndarray,
                       threshold: np.ndarray) -> list[dict[str, Any]]:
    """Per grid frame: the visible objects' ids and tight boxes."""
    owners = render_owners(scene, frames)
    present = _count_owned(owners, len(scene.objects)) >= threshold
    boxes = fit_tight_boxes(owners, len(scene.objects))
    ids = np.array(identities)
    return [{"frame": int(f), "ids": ids[present[i]].tolist(), "boxes": boxes[i][present[i]].round(1).tolist()}
            for i, f in enumerate(frames)]


def generate_long_video(path: str | Path, config: LongVideoConfig, chunk_frames: int = 150,
                        video: bool = True, clip_seconds: float = 8.0) -> dict[str, Any]:
    """Write ``path`` (MP4, unless ``video`` is False), ``path.with_suffix('.json')`` (the ground truth)
    and its per-clip records for clips of ``clip_seconds`` (``<stem>_clips.json``,
    :mod:`longvideo.clip_records`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    scene, identities = sample_long_scene(config)
    threshold = _visible_threshold(scene, SyntheticConfig(frame_size=(config.width, config.height),
                                                          object_size=config.object_size, wall_thickness=(32, 40)))
    grid = annotation_grid(config.fps, 0, config.num_frames - 1)
    truth_frames: list[dict[str, Any]] = []
    encoder = VideoWriter(path, config.fps, config.width, config.height, crf=config.crf,
                                    preset=config.preset) if video else None
    try:
        for start in range(0, config.num_frames, chunk_frames):
            frames = np.arange(start, min(start + chunk_frames, config.num_frames))
            if encoder is not None:
                encoder.write(render_frames(scene, frames))
            on_grid = grid[(grid >= frames[0]) & (grid <= frames[-1])]
            truth_frames += ground_truth_chunk(scene, identities, on_grid, threshold)
    except BaseException:
        if encoder is not None:
            encoder.abort()
        raise
    if encoder is not None:
        encoder.close()
    phrase = {i: o.phrase for i, o in zip(identities, scene.objects)}
    truth = {"format": "grove-long-synthetic", "version": 1, "video": path.name, "fps": config.fps,
             "num_frames": config.num_frames, "width": config.width, "height": config.height,
             "config": json.loads(json.dumps(asdict(config))),
             "objects": [{"id": i, "phrase": phrase[i]} for i in sorted(phrase)], "frames": truth_frames}
    path.with_suffix(".json").write_text(json.dumps(truth))
    write_clip_records(truth, path.with_suffix(".json"), clip_seconds)
    return truth
