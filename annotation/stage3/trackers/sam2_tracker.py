"""Box tracking with SAM 2's video predictor (Ravi et al., "SAM 2: Segment Anything in Images and
Videos", 2024; the ``sam2`` package): each key-frame box is a box prompt on its frame, the masks
are propagated forward and backward through the clip, and the box on a frame is the tight box of
the object's mask (absent where the mask is empty: SAM 2 predicts the object is not visible).

One model per worker (on the GPU when there is one). The objects of a clip are tracked together
(SAM 2 batches them); clips go one after another, as its inference state is per video.
``model_config`` is a SAM 2 model YAML (a file, or a config of the package such as
``configs/sam2.1/sam2.1_hiera_l.yaml``); ``checkpoint`` the released ``.pt`` (read as tensors only).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from annotation.stage3.trackers.box_tracking import TrackingInput, TrackingOutput
from annotation.stage3.trackers.cotracker_tracker import pick_device

_MEAN = (0.485, 0.456, 0.406)
_STD = (0.229, 0.224, 0.225)


def tight_boxes(masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tight xyxy boxes (pixel edges) of boolean masks (..., H, W) and whether each mask is non-empty."""
    rows, cols = masks.any(-1), masks.any(-2)
    present = rows.any(-1)
    h, w = masks.shape[-2:]
    y1 = rows.argmax(-1)
    y2 = h - rows[..., ::-1].argmax(-1)
    x1 = cols.argmax(-1)
    x2 = w - cols[..., ::-1].argmax(-1)
    boxes = np.stack([x1, y1, x2, y2], axis=-1).astype(np.float32)
    return np.where(present[..., None], boxes, 0.0), present


def _model_yaml(spec: str | Path) -> Path:
    path = Path(spec)
    if path.is_file():
        return path
    import sam2

    packaged = Path(sam2.__file__).parent / spec
    if packaged.is_file():
        return packaged
    raise FileNotFoundError(f"stage3.model_config: {spec} is neither a file nor a config of the sam2 package")


class SAM2BoxTracker:
    name = "sam2"

    def __init__(self, model_config: str | Path, checkpoint: str | Path | None = None, mask_threshold: float = 0.0,
                 device: str = "auto", seed: int = 0):
        self.model_config, self.checkpoint = model_config, checkpoint
        self.mask_threshold, self.seed = float(mask_threshold), int(seed)
        self.device = pick_device(device)
        self._model = None

    @property
    def model(self):
        if self._model is None:
            import core  # noqa: F401  (sam2 imports torchvision)

            import sam2.sam2_video_predictor as svp
            from hydra.utils import instantiate
            from omegaconf import OmegaConf

            svp.tqdm = lambda items, **_: items  # no progress bar per propagation (the engines draw their own)
            cfg = OmegaConf.load(_model_yaml(self.model_config))
            cfg.model._target_ = "sam2.sam2_video_predictor.SAM2VideoPredictor"
            torch.manual_seed(self.seed)  # a model without checkpoint (tests, plumbing) is the same every run
            model = instantiate(cfg.model, _recursive_=True)
            if self.checkpoint is not None:
                from core.weights import load_state_dict_file

                state = load_state_dict_file(self.checkpoint, "stage3.checkpoint")
                missing, unexpected = model.load_state_dict(state, strict=False)
                if missing or unexpected:
                    raise ValueError(f"stage3.checkpoint {self.checkpoint}: does not fit {self.model_config} "
                                     f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
            self._model = model.to(self.device).eval()
        return self._model

    def _state(self, frames: np.ndarray) -> dict:
        """SAM 2's inference state for in-memory frames (its ``init_state`` reads them from disk)."""
        import sam2.sam2_video_predictor as svp

        size = self.model.image_size
        video = torch.from_numpy(frames).to(self.device).permute(0, 3, 1, 2).float() / 255.0
        video = F.interpolate(video, (size, size), mode="bilinear", align_corners=False)
        mean = torch.tensor(_MEAN, device=self.device)[:, None, None]
        std = torch.tensor(_STD, device=self.device)[:, None, None]
        images = (video - mean) / std
        height, width = frames.shape[1:3]
        reader = svp.load_video_frames
        svp.load_video_frames = lambda **_: (images, height, width)
        try:
            return self.model.init_state("<frames in memory>")
        finally:
            svp.load_video_frames = reader

    @torch.inference_mode()
    def track(self, clips: list[TrackingInput]) -> list[TrackingOutput]:
        out = []
        for clip in clips:
            t, h, w = clip.frames.shape[:3]
            k = len(clip.rows)
            masks = np.zeros((t, k, h, w), dtype=bool)
            if k:
                # the predictor keeps its memory in bfloat16 (SAM 2 runs under bf16 autocast)
                with torch.autocast(self.device.type, dtype=torch.bfloat16):
                    self._propagate(clip, masks)
            boxes, present = tight_boxes(masks)
            out.append(TrackingOutput(boxes, present))
        return out

    def _propagate(self, clip: TrackingInput, masks: np.ndarray) -> None:
        state = self._state(clip.frames)
        for obj, (row, box) in enumerate(zip(clip.rows, clip.boxes)):
            self.model.add_new_points_or_box(state, frame_idx=int(row), obj_id=obj,
                                             box=np.asarray(box, dtype=np.float32))
        for reverse in (False, True):
            for frame, ids, logits in self.model.propagate_in_video(state, reverse=reverse):
                masks[frame, list(ids)] = (logits[:, 0].float() > self.mask_threshold).cpu().numpy()
