"""Watch it learn: a few fixed validation clips drawn to TensorBoard after every validation epoch.

Metrics say how much the model improves; pictures say how (boxes that drift to the right object,
captions that start naming the right things, objects correctly dropped when they leave). Each
chosen clip becomes one image: a strip of frames (the T segment-centre frames the caption is
generated from) with the ground-truth boxes and caption on top and the predicted ones below, the
same phrase in the same colour in both rows. The clips are chosen once (evenly over the validation
set) so that epochs can be compared with TensorBoard's step slider.
"""
from __future__ import annotations

from core.drawing import default_sizes, draw_boxes, load_font, phrase_colours, wrap_caption

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_warn
from PIL import Image, ImageDraw

from formats.video_files import open_video
from models.grove.frame_sampling import centre_frames

SEPARATOR = 2  # pixels between frames and rows


def resize_frames(frames: np.ndarray, height: int) -> tuple[np.ndarray, float]:
    """``(N, H, W, 3)`` uint8 frames to ``height`` px (aspect kept) and the scale applied."""
    h, w = frames.shape[1:3]
    scale = height / h
    width = max(1, int(round(w * scale)))
    x = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).float()
    x = F.interpolate(x, size=(height, width), mode="bilinear", align_corners=False, antialias=True)
    return x.round().clamp(0, 255).byte().permute(0, 2, 3, 1).numpy(), scale


def caption_band(width: int, text: str, font_size: int) -> np.ndarray:
    """White wrapped text on black, ``(h, width, 3)`` uint8."""
    font = load_font(font_size)
    pad = max(2, font_size // 3)
    lines = wrap_caption(text, font, width - 2 * pad) or [""]
    line_h = font.getbbox("Ag")[3] - font.getbbox("Ag")[1] + pad
    image = Image.new("RGB", (width, len(lines) * line_h + pad), (0, 0, 0))
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((pad, pad + i * line_h - font.getbbox("Ag")[1]), line, fill=(255, 255, 255), font=font)
    return np.asarray(image)


def draw_row(frames: np.ndarray, boxes_per_frame, labels_per_frame, colours, line_width: int,
             font_size: int) -> np.ndarray:
    """Frames side by side, each with its labelled boxes (already in the frames' pixel scale)."""
    n, h, w = frames.shape[:3]
    row = np.full((h, n * w + (n - 1) * SEPARATOR, 3), 255, dtype=np.uint8)
    for i in range(n):
        row[:, i * (w + SEPARATOR): i * (w + SEPARATOR) + w] = draw_boxes(
            frames[i:i + 1], boxes_per_frame[i], labels_per_frame[i], colours, line_width=line_width,
            font_size=font_size)[0]
    return row


def render_clip_strip(frames: np.ndarray, frame_indices, gt_boxes, gt_labels, gt_caption: str,
                      prediction: dict | None, frame_height: int = 128) -> np.ndarray:
    """One clip as an ``(H, W, 3)`` uint8 image: GT row + caption, then predicted row + caption.

    ``frames`` are the source frames at ``frame_indices``; ``gt_boxes[i]`` (pixel xyxy) and
    ``gt_labels[i]`` belong to frame i; ``prediction`` is the clip's entry of the predictions file.
    """
    small, scale = resize_frames(frames, frame_height)
    prediction = prediction or {"caption": "", "phrases": [], "frames": []}
    by_frame = {int(f["frame"]): f for f in prediction.get("frames", [])}
    pred_boxes, pred_labels = [], []
    for index in frame_indices:
        f = by_frame.get(int(index), {})
        pred_boxes.append(np.asarray(f.get("boxes") or np.zeros((0, 4)), dtype=np.float64).reshape(-1, 4) * scale)
        pred_labels.append(list(f.get("labels", [])))
    gt_scaled = [np.asarray(b, dtype=np.float64).reshape(-1, 4) * scale for b in gt_boxes]
    gt_phrases = [label for labels in gt_labels for label in labels]
    colours = phrase_colours(gt_phrases + list(prediction.get("phrases", [])))
    line_width, font_size = default_sizes(small.shape[2], small.shape[1])
    font_size = max(10, font_size)
    gt_row = draw_row(small, gt_scaled, gt_labels, colours, line_width, font_size)
    pred_row = draw_row(small, pred_boxes, pred_labels, colours, line_width, font_size)
    width = gt_row.shape[1]
    gap = np.full((SEPARATOR * 2, width, 3), 255, dtype=np.uint8)
    return np.concatenate([
        gt_row, caption_band(width, f"GT: {gt_caption}", font_size), gap,
        pred_row, caption_band(width, f"Predicted: {prediction.get('caption', '')}", font_size),
    ])


class ValidationClipVisualizer(L.Callback):
    """Logs fixed validation clips as images (``<tag>/<clip key>``) to the TensorBoard logger.

    Args:
        num_clips: how many validation clips to show (chosen evenly over the split, kept fixed).
        frames_per_clip: frames per strip (the segment centres, as the caption frames).
        frame_height: pixel height of each frame in the strip.
        every_n_epochs: draw on validation epochs whose index is a multiple of this.
        tag: TensorBoard tag prefix.
    """

    def __init__(self, num_clips: int = 4, frames_per_clip: int = 8, frame_height: int = 128,
                 every_n_epochs: int = 1, tag: str = "val_clips"):
        self.num_clips = num_clips
        self.frames_per_clip = frames_per_clip
        self.frame_height = frame_height
        self.every_n_epochs = max(1, every_n_epochs)
        self.tag = tag
        self.keys: dict[str, int] | None = None  # chosen clip key -> its index in the val records
        self.collected: dict[str, dict] = {}
        self._frames: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # decoded once, reused every epoch
        self._warned = False

    def _dataset(self, trainer):
        return getattr(trainer.datamodule, "datasets", {}).get("val") if trainer.datamodule is not None else None

    def _active(self, trainer) -> bool:
        return not trainer.sanity_checking and trainer.current_epoch % self.every_n_epochs == 0

    def on_validation_epoch_start(self, trainer, pl_module):
        self.collected = {}
        dataset = self._dataset(trainer)
        if self.keys is None and dataset is not None and len(dataset.records):
            n = len(dataset.records)
            chosen = np.unique(np.linspace(0, n - 1, min(self.num_clips, n)).round().astype(int))
            self.keys = {dataset.records[int(i)].key: int(i) for i in chosen}

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if self.keys and self._active(trainer) and isinstance(outputs, dict):
            predictions = outputs.get("predictions") or {}
            self.collected.update({k: predictions[k] for k in self.keys if k in predictions})

    def _clip_frames(self, dataset, record) -> tuple[np.ndarray, np.ndarray]:
        if record.key not in self._frames:
            positions = np.unique(centre_frames(len(record.bboxes), self.frames_per_clip))
            indices = record.frame_indices[positions]
            if hasattr(dataset, "decode_frames"):
                frames = dataset.decode_frames(record, indices)
            else:
                with open_video(dataset.video_root, record.video_fname) as video:
                    frames = video.read_frames(indices.tolist())
            self._frames[record.key] = (positions, frames)
        return self._frames[record.key]

    def on_validation_epoch_end(self, trainer, pl_module):
        if not self._active(trainer) or not trainer.is_global_zero or not self.collected:
            return
        loggers = [lg for lg in trainer.loggers if isinstance(lg, TensorBoardLogger)]
        if not loggers:
            if not self._warned:
                rank_zero_warn("ValidationClipVisualizer: no TensorBoardLogger configured; "
                               "validation clips are not drawn")
                self._warned = True
            return
        dataset = self._dataset(trainer)
        for key, prediction in self.collected.items():
            record = dataset.records[self.keys[key]]
            positions, frames = self._clip_frames(dataset, record)
            image = render_clip_strip(
                frames, record.frame_indices[positions], [record.bboxes[p] for p in positions],
                [record.labels[p] for p in positions], record.caption, prediction, self.frame_height)
            for logger in loggers:
                logger.experiment.add_image(f"{self.tag}/{key}", image, global_step=trainer.global_step,
                                            dataformats="HWC")
        self.collected = {}
