"""Synthetic grounded video clips: scenes, their rendering and their exact annotation.

Each clip shows 1-3 coloured shapes that move, enter or leave the frame and pass behind a grey
wall, over a low-saturation background. Everything the model must learn is exact by construction:
the box of an (annotated frame, object) is the tight box of the object's *visible* pixels (after
clipping to the frame and removing what the wall or nearer objects cover), and an object with
too few visible pixels is absent from that frame. The caption tells what each object does, one
clause per object in order of first appearance, with each object phrase tagged once. Colour,
shape and action are independent uniform draws, so no part of a caption can be guessed from
another; every action is recognisable from 8 frames spread over the clip.

Pixel boxes are ``[x1, y1, x2, y2]`` with exclusive ``x2, y2`` (pixel ``i`` covers ``[i, i+1)``).
Each box comes with its exact mask (the object's visible pixels, as a COCO RLE in the record's
``masks``), from the same rasterisation as the box.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from formats.frame_grids import annotation_grid
from formats.mask_rle import encode_masks
from formats.records import GroundedRecord, strip_tags

SPLITS = ("train", "val", "test")

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40), "green": (40, 180, 60), "blue": (40, 80, 230), "yellow": (240, 220, 40),
    "purple": (150, 60, 200), "orange": (250, 140, 30), "white": (250, 250, 250),
}
SHAPES = ("circle", "square", "triangle", "diamond", "cross")
SIDES = ("left", "right", "top", "bottom")
DIRECTIONS = ("left", "right", "up", "down")
# action -> caption clause; {side} / {direction} filled from the object's motion.
ACTIONS: dict[str, str] = {
    "enters": "enters from the {side}",
    "leaves": "leaves to the {side}",
    "moves": "moves {direction}",
    "stays_still": "stays still",
    "bounces": "bounces up and down",
    "hides": "hides behind the wall",
    "emerges": "emerges from behind the wall",
    "passes": "passes behind the wall",
}
WALL_ACTIONS = ("hides", "emerges", "passes")
_MAX_LAYOUT_TRIES = 200


@dataclass(frozen=True)
class SyntheticConfig:
    """Everything that determines the generated data (stored in the manifest to detect changes).

    ``frame_size`` is ``(width, height)`` or one int for square frames. ``object_size`` and
    ``wall_thickness`` are pixel ranges; an object is absent from a frame when fewer than
    ``min_visible_pixels`` or ``min_visible_fraction`` of its full area is visible.
    """

    frame_size: int | tuple[int, int] = 128
    fps: float = 25.0
    duration_s: float = 8.0
    min_objects: int = 1
    max_objects: int = 3
    object_size: tuple[int, int] = (14, 36)
    wall_thickness: tuple[int, int] = (32, 40)
    min_visible_pixels: int = 20
    min_visible_fraction: float = 0.15
    crf: int = 17
    preset: str = "ultrafast"  # x264: 2x the bytes of "veryfast" but faster to encode and to decode
    seed: int = 0
    num_train: int = 2000
    num_val: int = 200
    num_test: int = 200

    def __post_init__(self):
        size = self.frame_size
        size = (int(size), int(size)) if np.isscalar(size) else tuple(int(v) for v in size)
        object.__setattr__(self, "frame_size", size)
        object.__setattr__(self, "object_size", tuple(int(v) for v in self.object_size))
        object.__setattr__(self, "wall_thickness", tuple(int(v) for v in self.wall_thickness))
        smallest, largest = self.object_size
        if len(size) != 2 or min(size) < self.wall_thickness[1] + 2 * largest:
            raise ValueError(
                f"SyntheticConfig: frame_size {size} is too small for objects up to {largest} px on both "
                f"sides of a wall up to {self.wall_thickness[1]} px (needs >= {self.wall_thickness[1] + 2 * largest})")
        if not 4 <= smallest <= largest or self.wall_thickness[0] < smallest + 4:
            raise ValueError(f"SyntheticConfig: object_size {self.object_size} / wall_thickness {self.wall_thickness} "
                             "must satisfy 4 <= min <= max and wall >= min object + 4 (the wall must hide an object)")
        if not 1 <= self.min_objects <= self.max_objects <= len(COLOURS) * len(SHAPES):
            raise ValueError("SyntheticConfig: need 1 <= min_objects <= max_objects, "
                             f"got {self.min_objects}, {self.max_objects}")
        if self.num_frames < 2 or self.fps <= 0:
            raise ValueError(f"SyntheticConfig: fps {self.fps} x duration_s {self.duration_s} "
                             "gives fewer than 2 frames")
        if min(self.num_train, self.num_val, self.num_test) < 0:
            raise ValueError("SyntheticConfig: split sizes must be >= 0")

    @property
    def width(self) -> int:
        return self.frame_size[0]

    @property
    def height(self) -> int:
        return self.frame_size[1]

    @property
    def num_frames(self) -> int:
        return int(round(self.fps * self.duration_s))

    def split_sizes(self) -> dict[str, int]:
        return {"train": self.num_train, "val": self.num_val, "test": self.num_test}

    def to_json(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self)))


# ---------------------------------------------------------------------------- scene description

@dataclass
class SceneObject:
    """One shape: identity, what it does, and its centre ``(x, y)`` in every frame."""

    colour: str
    shape: str
    size: int
    action: str
    detail: str  # side or direction for enters/leaves/moves, else ""
    behind_wall: bool
    centres: np.ndarray  # (num_frames, 2) float, pixel coordinates of the shape's centre

    @property
    def phrase(self) -> str:
        article = "an" if self.colour[0] in "aeiou" else "a"
        return f"{article} {self.colour} {self.shape}"

    @property
    def clause(self) -> str:
        return ACTIONS[self.action].format(side=self.detail, direction=self.detail)

    def top_left(self, frames: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Integer ``(x, y)`` of the template's top-left pixel in the given frames."""
        return np.round(self.centres[frames] - self.size / 2.0).astype(np.int64)


@dataclass
class Wall:
    """A grey bar across the whole frame that hides the objects behind it (never captioned by name)."""

    vertical: bool
    start: int  # first covered column (vertical) or row (horizontal)
    end: int  # one past the last covered one


@dataclass
class SyntheticScene:
    """A sampled clip before rendering. ``objects`` is in drawing order: behind-the-wall ones first."""

    width: int
    height: int
    fps: float
    num_frames: int
    background: np.ndarray  # (H, W, 3) uint8, wall included
    wall: Wall
    objects: list[SceneObject] = field(default_factory=list)


def draw_shape(shape: str, size: int) -> np.ndarray:
    """``(size, size)`` bool template of a shape (pixel centres tested against its outline)."""
    u = (np.arange(size) + 0.5) / size * 2.0 - 1.0  # pixel centres in [-1, 1]
    x, y = u[None, :], u[:, None]
    if shape == "circle":
        mask = x ** 2 + y ** 2 <= 1.0
    elif shape == "square":
        mask = np.ones((size, size), dtype=bool)
    elif shape == "triangle":  # apex up
        mask = np.abs(x) <= (y + 1.0) / 2.0
    elif shape == "diamond":
        mask = np.abs(x) + np.abs(y) <= 1.0
    elif shape == "cross":
        mask = (np.abs(x) <= 1.0 / 3.0) | (np.abs(y) <= 1.0 / 3.0)
    else:
        raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    return np.broadcast_to(mask, (size, size)).copy()


# ---------------------------------------------------------------------------- sampling

def clip_rng(seed: int, split: str, index: int) -> np.random.Generator:
    """The generator of one clip: a function of (seed, split, index) only, so any worker count agrees."""
    return np.random.default_rng([int(seed), SPLITS.index(split), int(index)])


def _background(rng: np.random.Generator, width: int, height: int, wall: Wall) -> np.ndarray:
    """Low-saturation gradient plus blotchy noise, with a dark brick-striped wall painted on."""
    grey = rng.uniform(110, 185, size=2)
    ends = grey[:, None] + rng.uniform(-18, 18, size=(2, 3))
    angle = rng.uniform(0, 2 * np.pi)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    ramp = xx * np.cos(angle) + yy * np.sin(angle)
    ramp = (ramp - ramp.min()) / max(float(np.ptp(ramp)), 1e-6)
    image = ends[0] + (ends[1] - ends[0]) * ramp[..., None]
    cell = 16
    coarse = rng.normal(0, 6, size=(height // cell + 1, width // cell + 1, 1))
    image += np.repeat(np.repeat(coarse, cell, 0), cell, 1)[:height, :width]
    image += rng.uniform(-4, 4, size=(height, width, 1))
    # wall: dark grey with lighter mortar stripes running across it
    shade = rng.uniform(55, 85)
    along = np.arange(height if wall.vertical else width)
    stripes = np.where(along % 8 < 2, shade + 35.0, shade)
    if wall.vertical:
        image[:, wall.start:wall.end] = stripes[:, None, None]
    else:
        image[wall.start:wall.end, :] = stripes[None, :, None]
    return np.clip(np.round(image), 0, 255).astype(np.uint8)


def _keyframed(t: np.ndarray, keys: list[tuple[float, float]]) -> np.ndarray:
    times, values = zip(*keys)
    return np.interp(t, times, values)


def _sample_motion(rng, action: str, config: SyntheticConfig, wall: Wall, t: np.ndarray):
    """Size, detail, behind-the-wall flag and ``(num_frames, 2)`` centres for one action."""
    width, height = config.frame_size
    lo_size, hi_size = config.object_size
    wall_axis = 0 if wall.vertical else 1  # wall actions move across the wall
    if action in WALL_ACTIONS:
        extent = (width, height)[wall_axis]
        room_before, room_after = wall.start, extent - wall.end
        if action == "passes":
            room = min(room_before, room_after)
        else:
            room = max(room_before, room_after)
        size = int(rng.integers(lo_size, min(hi_size, wall.end - wall.start - 4, room) + 1))
    else:
        size = int(rng.integers(lo_size, hi_size + 1))
    half = size / 2.0
    frame_extent = np.array([width, height], dtype=np.float64)

    def inside(axis):  # a random fully-visible coordinate along axis
        return rng.uniform(half, frame_extent[axis] - half)

    detail, behind = "", False
    if action in ("enters", "leaves"):
        detail = SIDES[rng.integers(len(SIDES))]
        axis = 0 if detail in ("left", "right") else 1
        extent = frame_extent[axis]
        near_start = detail in ("left", "top")
        outside = -half - 1.0 if near_start else extent + half + 1.0
        depth = rng.uniform(0.35, 0.75) * (extent - size)
        inner = half + depth if near_start else extent - half - depth
        t0 = rng.uniform(0.0, 0.25)
        t1 = rng.uniform(t0 + 0.35, 0.8)
        keys = [(0.0, outside), (t0, outside), (t1, inner), (1.0, inner)]
        if action == "leaves":
            keys = [(1.0 - k, v) for k, v in reversed(keys)]
        along = _keyframed(t, keys)
    elif action == "moves":
        detail = DIRECTIONS[rng.integers(len(DIRECTIONS))]
        axis = 0 if detail in ("left", "right") else 1
        span = frame_extent[axis] - size
        distance = rng.uniform(0.5, 1.0) * span
        a = rng.uniform(half, frame_extent[axis] - half - distance)
        start, end = (a, a + distance) if detail in ("right", "down") else (a + distance, a)
        along = _keyframed(t, [(0.0, start), (1.0, end)])
    elif action == "stays_still":
        axis = 0
        along = np.full_like(t, inside(0))
    elif action == "bounces":
        axis = 1
        amplitude = rng.uniform(0.4, 0.8) * (height - size)
        floor = rng.uniform(half + amplitude, height - half)
        bounces = int(rng.integers(2, 4))
        along = floor - amplitude * np.abs(np.sin(np.pi * bounces * t))
    else:  # wall actions
        axis, behind = wall_axis, True
        extent = frame_extent[axis]
        hidden = (wall.start + wall.end) / 2.0
        before = (half, wall.start - half)  # fully visible ranges on each side of the wall
        after = (wall.end + half, extent - half)
        sides = [r for r in (before, after) if r[1] >= r[0]]
        if action == "passes":
            t1 = rng.uniform(0.25, 0.4)
            t2 = t1 + rng.uniform(0.2, 0.3)
            first, last = (before, after) if rng.random() < 0.5 else (after, before)
            keys = [(0.0, rng.uniform(*first)), (t1, hidden), (t2, hidden), (1.0, rng.uniform(*last))]
        else:
            visible = rng.uniform(*sides[rng.integers(len(sides))])
            t0 = rng.uniform(0.0, 0.25)
            t1 = rng.uniform(t0 + 0.3, 0.7)
            keys = [(0.0, visible), (t0, visible), (t1, hidden), (1.0, hidden)]
            if action == "emerges":
                keys = [(1.0 - k, v) for k, v in reversed(keys)]
        along = _keyframed(t, keys)
    centres = np.empty((len(t), 2), dtype=np.float64)
    centres[:, axis] = along
    centres[:, 1 - axis] = inside(1 - axis)
    return size, detail, behind, centres


def _expected_presence_ok(action: str, present: np.ndarray) -> bool:
    """Does the presence pattern over the annotated frames show the action?"""
    if action in ("enters", "emerges"):
        return not present[0] and present[-1]
    if action in ("leaves", "hides"):
        return present[0] and not present[-1]
    if action == "passes":
        return present[0] and present[-1] and not present.all()
    return bool(present.all())


def sample_scene(rng: np.random.Generator, config: SyntheticConfig) -> SyntheticScene:
    """Draw a clip: wall, background, objects (identity and action uniform), and their motion.

    Motion is re-drawn (identities and actions kept, so their distribution stays uniform) until
    every object shows its action on the annotation grid and no object's presence depends on
    being covered by another object: presence is then a property of each object's own motion.
    """
    width, height = config.frame_size
    num_frames = config.num_frames
    vertical = bool(rng.random() < 0.5)
    extent = width if vertical else height
    thickness = int(rng.integers(config.wall_thickness[0], config.wall_thickness[1] + 1))
    start = int(round(rng.uniform(0.35, 0.65) * extent - thickness / 2.0))
    wall = Wall(vertical=vertical, start=start, end=start + thickness)
    background = _background(rng, width, height, wall)

    count = int(rng.integers(config.min_objects, config.max_objects + 1))
    identities = rng.choice(len(COLOURS) * len(SHAPES), size=count, replace=False)
    actions = [list(ACTIONS)[i] for i in rng.integers(len(ACTIONS), size=count)]
    colours = list(COLOURS)
    t = np.linspace(0.0, 1.0, num_frames)
    grid = annotation_grid(config.fps, 0, num_frames - 1)
    for _ in range(_MAX_LAYOUT_TRIES):
        objects = []
        for ident, action in zip(identities, actions):
            size, detail, behind, centres = _sample_motion(rng, action, config, wall, t)
            objects.append(SceneObject(colour=colours[ident // len(SHAPES)], shape=SHAPES[ident % len(SHAPES)],
                                       size=size, action=action, detail=detail, behind_wall=behind,
                                       centres=centres))
        order = rng.permutation(count)
        objects = [objects[i] for i in order if objects[i].behind_wall] + \
                  [objects[i] for i in order if not objects[i].behind_wall]
        scene = SyntheticScene(width, height, config.fps, num_frames, background, wall, objects)
        present = count_visible_pixels(scene, grid) >= _visible_threshold(scene, config)
        alone = np.stack([count_visible_pixels(scene, grid, only=k)[:, k] for k in range(count)], axis=1)
        alone_present = alone >= _visible_threshold(scene, config)
        if np.array_equal(present, alone_present) and all(
                _expected_presence_ok(o.action, present[:, k]) for k, o in enumerate(objects)):
            return scene
    raise RuntimeError(f"could not lay out {count} objects with actions {actions} in {_MAX_LAYOUT_TRIES} tries")


# ---------------------------------------------------------------------------- rendering

def _margin(scene: SyntheticScene) -> int:
    """Canvas padding that holds any object position (off-frame ones are clamped into it)."""
    return max(o.size for o in scene.objects) + 2


def _paint(canvas: np.ndarray, scene: SyntheticScene, frames: np.ndarray, values, redraw_wall) -> None:
    """Paint objects in drawing order onto a padded ``(G, H+2m, W+2m[, C])`` canvas, vectorised over frames.

    ``values[k]`` is what object k paints; ``redraw_wall(canvas)`` restores the wall after the
    behind-the-wall objects are drawn.
    """
    margin = _margin(scene)
    wall_drawn = False
    g = np.arange(len(frames))[:, None]
    for k, obj in enumerate(scene.objects):
        if not obj.behind_wall and not wall_drawn:
            redraw_wall(canvas)
            wall_drawn = True
        if values[k] is None:
            continue
        ys, xs = np.nonzero(draw_shape(obj.shape, obj.size))
        top_left = obj.top_left(frames)
        left = np.clip(top_left[:, 0], -margin, scene.width + margin - obj.size) + margin
        top = np.clip(top_left[:, 1], -margin, scene.height + margin - obj.size) + margin
        canvas[g, top[:, None] + ys, left[:, None] + xs] = values[k]
    if not wall_drawn:
        redraw_wall(canvas)


def _wall_slices(scene: SyntheticScene, margin: int):
    span = slice(scene.wall.start + margin, scene.wall.end + margin)
    return (slice(None), slice(None), span) if scene.wall.vertical else (slice(None), span)


def render_owners(scene: SyntheticScene, frames: np.ndarray, only: int | None = None) -> np.ndarray:
    """``(G, H, W)`` uint8: which object (``k + 1``) is visible at each pixel, 0 for background/wall.

    ``only=k`` draws object k alone (with the wall), to tell what other objects cover.
    """
    frames = np.asarray(frames)
    margin = _margin(scene)
    canvas = np.zeros((len(frames), scene.height + 2 * margin, scene.width + 2 * margin), dtype=np.uint8)
    values = [k + 1 if only is None or only == k else None for k in range(len(scene.objects))]

    def redraw_wall(c):
        c[_wall_slices(scene, margin)] = 0

    _paint(canvas, scene, frames, values, redraw_wall)
    return canvas[:, margin:margin + scene.height, margin:margin + scene.width]


def count_visible_pixels(scene: SyntheticScene, frames: np.ndarray, only: int | None = None) -> np.ndarray:
    """``(G, K)`` number of visible pixels of each object in each of the given frames."""
    return _count_owned(render_owners(scene, frames, only), len(scene.objects))


def _count_owned(owners: np.ndarray, num_objects: int) -> np.ndarray:
    flat = owners.reshape(len(owners), -1)
    return np.stack([(flat == k + 1).sum(1) for k in range(num_objects)], axis=1)


def _visible_threshold(scene: SyntheticScene, config: SyntheticConfig) -> np.ndarray:
    """``(K,)`` fewest visible pixels for an object to count as present."""
    areas = np.array([draw_shape(o.shape, o.size).sum() for o in scene.objects])
    return np.maximum(config.min_visible_pixels, np.ceil(config.min_visible_fraction * areas))


def render_frames(scene: SyntheticScene, frames: np.ndarray | None = None) -> np.ndarray:
    """``(N, H, W, 3)`` uint8 RGB frames of the scene (all frames by default)."""
    frames = np.arange(scene.num_frames) if frames is None else np.asarray(frames)
    margin = _margin(scene)
    padded = np.pad(scene.background, ((margin, margin), (margin, margin), (0, 0)), mode="edge")
    canvas = np.repeat(padded[None], len(frames), axis=0)
    values = [np.array(COLOURS[o.colour], dtype=np.uint8) for o in scene.objects]
    wall = _wall_slices(scene, margin)

    def redraw_wall(c):
        c[wall] = padded[None][wall]

    _paint(canvas, scene, frames, values, redraw_wall)
    return np.ascontiguousarray(canvas[:, margin:margin + scene.height, margin:margin + scene.width])


def fit_tight_boxes(owners: np.ndarray, num_objects: int) -> np.ndarray:
    """``(G, K, 4)`` float32 tight pixel boxes (exclusive ends) of each object's visible pixels."""
    g, h, w = owners.shape
    ids = np.arange(1, num_objects + 1, dtype=owners.dtype)
    mask = owners[:, None] == ids[None, :, None, None]  # (G, K, H, W)
    rows, cols = mask.any(3), mask.any(2)
    y1, y2 = rows.argmax(2), h - rows[..., ::-1].argmax(2)
    x1, x2 = cols.argmax(2), w - cols[..., ::-1].argmax(2)
    return np.stack([x1, y1, x2, y2], axis=-1).astype(np.float32)


# ---------------------------------------------------------------------------- annotation

def annotate_scene(scene: SyntheticScene, config: SyntheticConfig, video_id: str, clip_id: str = "0") -> GroundedRecord:
    """The canonical record of a scene: caption in order of first appearance, exact boxes and masks on the
    5-fps grid."""
    grid = annotation_grid(scene.fps, 0, scene.num_frames - 1)
    owners = render_owners(scene, grid)
    count = len(scene.objects)
    present = _count_owned(owners, count) >= _visible_threshold(scene, config)
    boxes = fit_tight_boxes(owners, count)
    # clauses follow first appearance; ties keep drawing order (itself a random permutation)
    order = np.argsort(present.argmax(0), kind="stable")
    objects = [scene.objects[k] for k in order]
    tagged = ", then ".join(f"<p>{o.phrase}</p> {o.clause}" for o in objects) + "."
    present, boxes = present[:, order], boxes[:, order]
    phrases = [o.phrase for o in objects]
    bboxes = [boxes[i][present[i]] for i in range(len(grid))]
    labels = [[phrases[j] for j in np.flatnonzero(present[i])] for i in range(len(grid))]
    # The visible pixels of object order[j] in frame i: what the boxes were fitted to.
    visible = owners[:, None] == (order + 1).astype(owners.dtype)[None, :, None, None]  # (G, K, H, W)
    masks = [encode_masks(visible[i][present[i]]) for i in range(len(grid))]
    raw = {
        "video_fname": f"{video_id}_{clip_id}.mp4", "video_id": video_id, "clip_id": clip_id,
        "fps": float(scene.fps), "clip_start_frame": 0, "clip_end_frame": scene.num_frames - 1,
        "width": scene.width, "height": scene.height, "caption": strip_tags(tagged), "tagged_caption": tagged,
        "phrases": phrases, "bboxes": bboxes, "labels": labels, "masks": masks,
        "synthetic": {
            "objects": [{"phrase": o.phrase, "colour": o.colour, "shape": o.shape, "size": o.size,
                         "action": o.action, "detail": o.detail, "behind_wall": o.behind_wall} for o in objects],
            "wall": {"orientation": "vertical" if scene.wall.vertical else "horizontal",
                     "start": scene.wall.start, "end": scene.wall.end},
        },
    }
    return GroundedRecord.from_dict(raw, source="synthetic generator", key=f"{video_id}_{clip_id}")


def generate_clip(rng: np.random.Generator, config: SyntheticConfig, split: str = "train",
                  index: int = 0) -> tuple[np.ndarray, GroundedRecord]:
    """One clip: ``(frames (N, H, W, 3) uint8, record)``; the record's video id is ``synth{split}{index:05d}``."""
    scene = sample_scene(rng, config)
    return render_frames(scene), annotate_scene(scene, config, f"synth{split}{index:05d}")
