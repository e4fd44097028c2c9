"""Box tracking with CoTracker3 (offline): query points inside each key-frame box, tracked through the clip.

One model per worker (loaded on the first batch, on the GPU when there is one). Clips with the same
number of frames and frame size go through the model together, their query lists padded to the
longest (padding points are dropped from the output).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from annotation.stage3.trackers.box_tracking import TrackingInput, TrackingOutput, box_grid_points, boxes_from_points


def pick_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


class CoTrackerBoxTracker:
    """``path``: the released ``scaled_offline.pth`` (or any CoTracker3 offline state dict);
    ``model_config``: sizes the file does not fix (e.g. ``model_resolution``, ``num_heads`` of a tiny model).
    ``path: null`` builds the ``model_config`` model with random weights (seeded by ``seed``): plumbing only."""

    name = "cotracker"

    def __init__(self, path: str | Path | None, model_config: dict | None = None, points_per_side: int = 4,
                 min_visible: float = 0.5, iters: int = 6, support_grid_size: int = 6,
                 visibility_threshold: float = 0.9, batch_size: int = 4, device: str = "auto", seed: int = 0):
        self.path = None if path is None else Path(path)
        self.model_config, self.seed = dict(model_config or {}), int(seed)
        self.per_side, self.min_visible = int(points_per_side), float(min_visible)
        self.iters, self.support_grid_size = int(iters), int(support_grid_size)
        self.visibility_threshold, self.batch_size = float(visibility_threshold), max(1, int(batch_size))
        self.device = pick_device(device)
        self._predictor = None

    @property
    def predictor(self):
        if self._predictor is None:
            from models.cotracker3.convert_official import load_cotracker3
            from models.cotracker3.modeling import CoTracker3Config, CoTracker3Offline, CoTracker3Predictor

            options = dict(self.model_config)
            known = set(CoTracker3Config.__dataclass_fields__)
            unknown = sorted(set(options) - known)
            if unknown:
                raise ValueError(f"stage3.model_config.{unknown[0]} is not a CoTracker3 size "
                                 f"(sizes: {', '.join(sorted(known))})")
            if "model_resolution" in options:
                options["model_resolution"] = tuple(options["model_resolution"])
            base = replace(CoTracker3Config(), **options)
            if self.path is None:
                torch.manual_seed(self.seed)
                model = CoTracker3Offline(base).to(self.device).eval()
            else:
                model = load_cotracker3(self.path, base, self.device)
            self._predictor = CoTracker3Predictor(model, self.iters, self.support_grid_size,
                                                  self.visibility_threshold).to(self.device).eval()
        return self._predictor

    def track(self, clips: list[TrackingInput]) -> list[TrackingOutput]:
        out: list[TrackingOutput | None] = [None] * len(clips)
        points = [box_grid_points(c.boxes, self.per_side) for c in clips]
        groups: dict[tuple, list[int]] = {}
        for i, clip in enumerate(clips):
            if len(clip.rows) == 0:
                t = len(clip.frames)
                out[i] = TrackingOutput(np.zeros((t, 0, 4), np.float32), np.zeros((t, 0), bool))
            else:
                groups.setdefault(clip.frames.shape, []).append(i)
        for members in groups.values():
            for start in range(0, len(members), self.batch_size):
                batch = members[start:start + self.batch_size]
                queries = [np.concatenate([np.repeat(clips[i].rows, points[i].shape[1])[:, None].astype(np.float32),
                                           points[i].reshape(-1, 2)], axis=1) for i in batch]
                longest = max(len(q) for q in queries)
                padded = np.stack([np.concatenate([q, np.repeat(q[:1], longest - len(q), axis=0)]) for q in queries])
                video = torch.from_numpy(np.stack([clips[i].frames for i in batch])).to(self.device)
                video = video.permute(0, 1, 4, 2, 3).float()
                tracks, visible = self.predictor(video, torch.from_numpy(padded).to(self.device))
                tracks, visible = tracks.cpu().numpy().astype(np.float64), visible.cpu().numpy()
                for j, i in enumerate(batch):
                    k, p = points[i].shape[:2]
                    t = len(clips[i].frames)
                    out[i] = boxes_from_points(points[i], clips[i].boxes, tracks[j, :, :k * p].reshape(t, k, p, 2),
                                               visible[j, :, :k * p].reshape(t, k, p),
                                               (clips[i].frames.shape[2], clips[i].frames.shape[1]), self.min_visible)
        return out
