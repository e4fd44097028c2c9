"""A per-clip memo of a frozen Qwen2.5-VL vision tower's video tokens.

With the tower and merger frozen (the paper's policy), a clip's video tokens are a fixed function
of its pixels, yet training recomputes them every time the clip is drawn: on the toy judge that is
about 17 % of a step (bench/bench_judge_step.py). This memo keys each clip by a digest of its exact
pixel values (computed in the data workers, :func:`pixel_digest`) and its patch grid, and hands the language model the
stored tokens through transformers' ``mm_encoder_outputs``. The keys are exact, so a hit returns
what the tower would compute; the memo empties itself when any tower weight is replaced or changed
in place (a checkpoint load), and it refuses a tower that trains.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Sequence

import torch
from torch import Tensor, nn


def pixel_digest(pixels: Tensor) -> str:
    """Hex digest of a clip's exact ``pixel_values_videos`` (values, dtype and shape)."""
    data = pixels.detach().contiguous().cpu()
    digest = hashlib.sha1(data.numpy().tobytes())
    digest.update(f"{data.dtype}{tuple(data.shape)}".encode())
    return digest.hexdigest()


class FrozenVideoFeatureCache:
    """Keeps the merged video tokens of up to ``max_clips`` clips, least recently used out first.

    ``features(model, pixel_values_videos, video_grid_thw, digests)`` returns what
    ``model.get_video_features`` would (``pooler_output``: one ``(tokens, hidden)`` tensor per clip),
    running the tower only on the clips it has not seen. ``model`` is the ``Qwen2_5_VLModel`` (the
    part holding ``visual``). ``hits`` / ``misses`` count clips.
    """

    def __init__(self, max_clips: int):
        if int(max_clips) < 1:
            raise ValueError(f"video feature cache needs max_clips >= 1, got {max_clips}")
        self.max_clips = int(max_clips)
        self._store: OrderedDict[tuple, Tensor] = OrderedDict()
        self._weights: tuple | None = None
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._store)

    def clear(self) -> None:
        self._store.clear()

    @staticmethod
    def _weights_state(tower: nn.Module) -> tuple:
        """Which tensors the tower holds and their in-place version counters: changes on any load."""
        return tuple((name, p.data_ptr(), p._version) for name, p in tower.named_parameters())

    def features(self, model: nn.Module, pixel_values_videos: Tensor, video_grid_thw: Tensor,
                 digests: Sequence[str] | None = None):
        from transformers.modeling_outputs import BaseModelOutputWithPooling

        tower = model.visual
        trainable = [name for name, p in tower.named_parameters() if p.requires_grad]
        if trainable:
            raise ValueError(f"the video feature cache needs a frozen vision tower and merger; {trainable[0]} "
                             "trains (set video_feature_cache: 0, or train_vision / train_merger: false)")
        state = self._weights_state(tower)
        if state != self._weights:
            self.clear()
            self._weights = state
        patches = video_grid_thw.prod(-1).tolist()
        clips = pixel_values_videos.split(patches)
        if digests is None:
            digests = [pixel_digest(c) for c in clips]
        if len(digests) != len(clips):
            raise ValueError(f"{len(digests)} video digests for {len(clips)} clips")
        keys = [(d, tuple(g)) for d, g in zip(digests, video_grid_thw.tolist())]
        missing = list(dict.fromkeys(k for k in keys if k not in self._store))  # each new clip once
        self.misses += len(missing)
        self.hits += len(keys) - len(missing)
        if missing:
            first = [keys.index(k) for k in missing]
            with torch.no_grad():
                out = model.get_video_features(torch.cat([clips[i] for i in first]), video_grid_thw[first],
                                               return_dict=True)
            for key, tokens in zip(missing, out.pooler_output):
                self._store[key] = tokens.detach()
        tokens = []
        for key in keys:
            self._store.move_to_end(key)
            tokens.append(self._store[key])
        while len(self._store) > self.max_clips:
            self._store.popitem(last=False)
        return BaseModelOutputWithPooling(pooler_output=tuple(tokens))


__all__ = ["FrozenVideoFeatureCache", "pixel_digest"]
