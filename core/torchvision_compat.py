"""Make ``import torchvision`` work on a CPU-only torch build.

The registry's torchvision wheel that matches torch 2.13.0 is a CUDA build. With CPU torch its
``_C`` extension fails to register its operators, and torchvision's Python meta-kernels then
fail on ``torchvision::nms does not exist``; everything that imports torchvision (lightning,
torchmetrics, open_clip, segment_anything) breaks with it. Declaring the operator *schemas*
before torchvision is imported lets the import succeed. The compiled kernels are still missing,
so the project never calls torchvision ops: boxes go through :mod:`core.box_ops`.

Importing this module is a no-op when torch has CUDA or when torchvision already imported.
"""
from __future__ import annotations

import sys

import torch

# Schemas of the operators torchvision's Python side registers fake/meta kernels for.
_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qroi_align": (
        "qroi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
        "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor"
    ),
    "roi_align": (
        "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
        "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor"
    ),
    "_roi_align_backward": (
        "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height, "
        "SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width, "
        "int sampling_ratio, bool aligned) -> Tensor"
    ),
    "roi_pool": (
        "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
        "SymInt pooled_width) -> (Tensor, Tensor)"
    ),
    "_roi_pool_backward": (
        "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale, "
        "SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, "
        "SymInt height, SymInt width) -> Tensor"
    ),
    "ps_roi_align": (
        "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
        "SymInt pooled_width, int sampling_ratio) -> (Tensor, Tensor)"
    ),
    "_ps_roi_align_backward": (
        "_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping, "
        "float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio, "
        "SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor"
    ),
    "ps_roi_pool": (
        "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
        "SymInt pooled_width) -> (Tensor, Tensor)"
    ),
    "_ps_roi_pool_backward": (
        "_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping, "
        "float spatial_scale, SymInt pooled_height, SymInt pooled_width, SymInt batch_size, "
        "SymInt channels, SymInt height, SymInt width) -> Tensor"
    ),
    "deform_conv2d": (
        "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, "
        "SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, "
        "SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> Tensor"
    ),
    "_deform_conv2d_backward": (
        "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset, "
        "Tensor mask, Tensor bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, "
        "SymInt dilation_h, SymInt dilation_w, SymInt groups, SymInt offset_groups, "
        "bool use_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)"
    ),
}

_LIBRARY = None  # keep the Library object alive: dropping it unregisters the schemas


def _operator_exists(name: str) -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(f"torchvision::{name}", "")
        return True
    except RuntimeError:
        return False


def ensure_torchvision_importable() -> bool:
    """Declare torchvision's operator schemas when torch lacks CUDA. Returns True if it did."""
    global _LIBRARY
    if torch.cuda.is_available() or torch.version.cuda is not None or "torchvision" in sys.modules:
        return False
    if _LIBRARY is not None or _operator_exists("nms"):
        return False
    library = torch.library.Library("torchvision", "DEF")
    for name, schema in _SCHEMAS.items():
        if not _operator_exists(name):
            library.define(schema)
    _LIBRARY = library
    return True


ensure_torchvision_importable()
