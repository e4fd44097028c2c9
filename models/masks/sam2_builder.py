"""SAM 2 (Ravi et al., "SAM 2: Segment Anything in Images and Videos", 2024; the ``sam2`` package)
built from a model YAML and a local checkpoint, and its video inference state made from frames
already in memory. Shared by the annotation tracker (:mod:`annotation.stage3.trackers.sam2_tracker`)
and the maskers of :mod:`models.masks`, so both read the same configs and weights the same way.

``model_config`` is a SAM 2 model YAML (a file, or a config of the package such as
``configs/sam2.1/sam2.1_hiera_l.yaml``); ``checkpoint`` the released ``.pt`` (read as tensors only,
nothing downloaded). Without a checkpoint the weights are random, drawn from ``seed`` (tests, plumbing).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

# SAM 2's image normalisation (ImageNet statistics), applied after resizing to its square input
SAM2_MEAN = (0.485, 0.456, 0.406)
SAM2_STD = (0.229, 0.224, 0.225)


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"``: the GPU when there is one, else the CPU; anything else as given."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def sam2_model_yaml(spec: str | Path, key: str = "stage3.model_config") -> Path:
    """The YAML file ``spec`` names: a file, or a config inside the ``sam2`` package."""
    path = Path(spec)
    if path.is_file():
        return path
    import sam2

    packaged = Path(sam2.__file__).parent / spec
    if packaged.is_file():
        return packaged
    raise FileNotFoundError(f"{key}: {spec} is neither a file nor a config of the sam2 package")


def build_sam2_video_predictor(model_config: str | Path, checkpoint: str | Path | None, device: torch.device,
                               seed: int = 0, key: str = "stage3"):
    """A ``sam2.sam2_video_predictor.SAM2VideoPredictor`` in eval mode on ``device``.

    ``key`` names the config section in error messages (``{key}.model_config``, ``{key}.checkpoint``).
    The video predictor is also a full SAM 2 (``SAM2Base``), so image-mode prompting uses the same model.
    """
    import core  # noqa: F401  (sam2 imports torchvision)

    import sam2.sam2_video_predictor as svp
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    svp.tqdm = lambda items, **_: items  # no progress bar per propagation (callers draw their own)
    cfg = OmegaConf.load(sam2_model_yaml(model_config, f"{key}.model_config"))
    cfg.model._target_ = "sam2.sam2_video_predictor.SAM2VideoPredictor"
    torch.manual_seed(seed)  # a model without checkpoint (tests, plumbing) is the same every run
    model = instantiate(cfg.model, _recursive_=True)
    if checkpoint is not None:
        from core.weights import load_state_dict_file

        state = load_state_dict_file(checkpoint, f"{key}.checkpoint")
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise ValueError(f"{key}.checkpoint {checkpoint}: does not fit {model_config} "
                             f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    return model.to(device).eval()


def sam2_images(frames: np.ndarray, image_size: int, device: torch.device) -> torch.Tensor:
    """``(N, H, W, 3)`` uint8 frames -> SAM 2's normalised square inputs ``(N, 3, S, S)`` on ``device``."""
    video = torch.from_numpy(np.ascontiguousarray(frames)).to(device).permute(0, 3, 1, 2).float() / 255.0
    video = F.interpolate(video, (image_size, image_size), mode="bilinear", align_corners=False)
    mean = torch.tensor(SAM2_MEAN, device=device)[:, None, None]
    std = torch.tensor(SAM2_STD, device=device)[:, None, None]
    return (video - mean) / std


def sam2_video_state(model, frames: np.ndarray, device: torch.device) -> dict:
    """SAM 2's inference state for in-memory frames ``(N, H, W, 3)`` uint8 (its ``init_state`` reads
    them from disk); masks then come back at the frames' own size."""
    import sam2.sam2_video_predictor as svp

    images = sam2_images(frames, model.image_size, device)
    height, width = frames.shape[1:3]
    reader = svp.load_video_frames
    svp.load_video_frames = lambda **_: (images, height, width)
    try:
        return model.init_state("<frames in memory>")
    finally:
        svp.load_video_frames = reader


__all__ = ["SAM2_MEAN", "SAM2_STD", "build_sam2_video_predictor", "resolve_device", "sam2_images",
           "sam2_model_yaml", "sam2_video_state"]
