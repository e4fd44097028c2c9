"""The released GROVE's input procedure, for bench/bench_predict.py: each clip's frames read and
preprocessed as the official ``infer_iground.py`` does it (its ``HowTo100M`` dataset, its
``CustomBatch`` collate and the caption's centre frames of its ``inference``), re-run here on the
bench's clips beside the project's own decode and preprocessing of the same clips at the same sizes.

The official code (github.com/ekazakos/grove, ``infer_iground.py``, ``model/SAM/utils/transforms.py``,
``requirements.txt``):

- decode: the frames ``range(clip_start_frame, clip_end_frame + 1, int(fps / 5))`` (40 per 8-s clip
  at 25 fps), each read by its own ``ffmpeg -ss t -i video -f rawvideo -pix_fmt rgb24 -vframes 1
  pipe:`` process, as ffmpeg-python 0.2.0's ``.run(capture_stdout=True, quiet=True)`` starts it;
- global (CLIP) input: ``CLIPImageProcessor.preprocess(images, return_tensors="pt")`` of
  transformers 4.46.3 (the slow numpy/PIL processor; the transformers installed here is 5.x, whose
  processor is another implementation, so :func:`clip_image_processor` re-runs the 4.46.3 steps),
  ``.bfloat16()``, permuted to ``(C, T, H, W)``;
- grounding (SAM) input: ``ResizeLongestSide(512).apply_image`` per frame (torchvision's
  ``to_pil_image`` and ``resize``), stacked, ``grounding_enc_processor`` (SAM's mean/std in float,
  ``F.pad`` to 512), ``.bfloat16()``;
- all frames kept (``temporal_sampling=False``); the collate stacks the batch (one clip, the script's
  default); ``inference`` takes the caption's 8 centre frames from ``sliding_segment_with_mask``.

:func:`check_equal` asserts, on one clip, that these pixel values are the project's
``preprocess_global(frames, 336, "clip")`` and ``preprocess_grounding(frames, 512, "sam")`` of the
same frames up to bf16 rounding, and that the centre frames are the project's caption positions, so
the two procedures compared produce the same model input.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from datamodules.video_folder import VideoFolderDataset
from models.grove.clip_processing import clip_sample, evaluation_positions
from models.grove.image_processing import preprocess_global, preprocess_grounding

TARGET_FPS = 5  # the HowTo100M dataset's target_fps
CLIP_SIZE, CLIP_CROP = 336, 336  # openai/clip-vit-large-patch14-336's preprocessor_config.json
OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
SAM_SIZE = 512
SAM_MEAN = torch.Tensor([123.675, 116.28, 103.53]).view(-1, 1, 1)
SAM_STD = torch.Tensor([58.395, 57.12, 57.375]).view(-1, 1, 1)
NUM_SEGMENTS = 8


def released_frame_ids(record) -> list[int]:
    """The source frames the released dataset reads for a clip."""
    return list(range(record.clip_start_frame, record.clip_end_frame + 1, int(record.fps / TARGET_FPS)))


def ffmpeg_frame(ffmpeg: str, video: Path, timestamp: float) -> bytes:
    """``ffmpeg.input(video, ss=t).output('pipe:', vframes=1, format='rawvideo', pix_fmt='rgb24')
    .run(capture_stdout=True, quiet=True)``: the command line ffmpeg-python builds, run as it runs it."""
    process = subprocess.Popen([ffmpeg, "-ss", str(timestamp), "-i", str(video), "-f", "rawvideo", "-pix_fmt",
                                "rgb24", "-vframes", "1", "pipe:"], stdin=None, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    out, err = process.communicate()
    if process.poll():
        raise RuntimeError(f"ffmpeg failed on {video} at {timestamp} s: {err.decode()[-2000:]}")
    return out


def clip_image_processor(images: np.ndarray) -> torch.Tensor:
    """transformers 4.46.3's ``CLIPImageProcessor.preprocess(images, return_tensors="pt")["pixel_values"]``
    with openai/clip-vit-large-patch14-336's settings, step by step as its ``image_transforms`` run them."""
    from PIL import Image

    mean = np.array(OPENAI_CLIP_MEAN, dtype=np.float32)
    std = np.array(OPENAI_CLIP_STD, dtype=np.float32)
    processed = []
    for image in list(images):  # make_list_of_images: a 4-D array is the list of its frames (channels last)
        # resize: get_resize_output_image_size, the shortest edge to 336 and the other int()-truncated;
        # to_pil_image (an astype(uint8) copy), PIL bicubic, back to a numpy array
        height, width = image.shape[:2]
        short, long = (width, height) if width <= height else (height, width)
        new_short, new_long = CLIP_SIZE, int(CLIP_SIZE * long / short)
        out_h, out_w = (new_long, new_short) if width <= height else (new_short, new_long)
        pil = Image.fromarray(image.astype(np.uint8), mode=None)
        image = np.array(pil.resize((out_w, out_h), resample=Image.Resampling.BICUBIC, reducing_gap=None))
        # center_crop: cropped channels first, offsets rounded down, handed back channels last
        first = image.transpose(2, 0, 1)
        top, left = (out_h - CLIP_CROP) // 2, (out_w - CLIP_CROP) // 2
        image = first[..., top:top + CLIP_CROP, left:left + CLIP_CROP].transpose(1, 2, 0)
        # rescale: float64 times 1/255, then float32; normalize: (x - mean) / std in float32
        image = (image.astype(np.float64) * (1 / 255)).astype(np.float32)
        image = (image - mean) / std
        processed.append(image.transpose(2, 0, 1))  # to_channel_dimension_format(FIRST)
    return torch.tensor(np.array(processed))  # BatchFeature(tensor_type="pt")


def resize_longest_side(image: np.ndarray) -> np.ndarray:
    """SAM's ``ResizeLongestSide(512).apply_image``: torchvision's ``to_pil_image`` and ``resize``
    (PIL bilinear) to the longest side 512, the other rounded half up."""
    from core import torchvision_compat  # noqa: F401  (the project's shim must run before torchvision)

    from torchvision.transforms.functional import resize, to_pil_image

    scale = SAM_SIZE * 1.0 / max(image.shape[0], image.shape[1])
    new_h, new_w = int(image.shape[0] * scale + 0.5), int(image.shape[1] * scale + 0.5)
    return np.array(resize(to_pil_image(image), (new_h, new_w)))


def grounding_enc_processor(x: torch.Tensor) -> torch.Tensor:
    """SAM's normalisation of ``(C, T, h, w)`` pixels, in float, and the bottom-right zero padding to 512."""
    x = (x - SAM_MEAN[:, None, :, :]) / SAM_STD[:, None, :, :]
    _, _, h, w = x.shape
    return F.pad(x, (0, SAM_SIZE - w, 0, SAM_SIZE - h))


def caption_indices(num_frames: int) -> list[int]:
    """The 8 frames ``inference`` generates the caption from: of the sliding windows of
    ``sliding_segment_with_mask`` (window ``o`` holds frames ``i * (T // 8) + o``, then the remainder's),
    the middle one of those up to the last whose frames are all unseen."""
    size, remainder = num_frames // NUM_SEGMENTS, num_frames % NUM_SEGMENTS
    windows = [[i * size + o for i in range(NUM_SEGMENTS)] for o in range(size)]
    windows += [[i * size + size + o for i in range(NUM_SEGMENTS) if i * size + size + o < num_frames]
                for o in range(remainder)]
    seen: set[int] = set()
    last_unseen = 0
    for k, window in enumerate(w for w in windows if w):
        if not seen.intersection(window):
            last_unseen = k
        seen.update(window)
    return [w for w in windows if w][last_unseen // 2]


def released_clip(ffmpeg: str, video: Path, record, timer) -> tuple[np.ndarray, dict[str, torch.Tensor]]:
    """The released procedure on one clip: its decoded frames and its model input (all frames, and the
    caption's centre frames), decode and preprocessing timed apart."""
    with timer.part("released decode"):
        frames = [ffmpeg_frame(ffmpeg, video, frame_id / record.fps) for frame_id in released_frame_ids(record)]
        images = np.concatenate([np.frombuffer(f, np.uint8).reshape([1, record.height, record.width, 3])
                                 for f in frames])
    with timer.part("released preprocess"):
        global_all = clip_image_processor(images).bfloat16().permute(1, 0, 2, 3).contiguous()
        resized = np.stack([resize_longest_side(im) for im in images])
        grounding_all = grounding_enc_processor(torch.from_numpy(resized).permute(3, 0, 1, 2).contiguous())
        grounding_all = grounding_all.bfloat16()
        global_batch, grounding_batch = torch.stack([global_all]), torch.stack([grounding_all])  # CustomBatch
        centre = caption_indices(global_batch.shape[2])
        inputs = {"global": global_batch, "grounding": grounding_batch, "centre": torch.tensor(centre),
                  "global_centre": global_batch[:, :, centre], "grounding_centre": grounding_batch[:, :, centre]}
    return images, inputs


def project_clip(dataset: VideoFolderDataset, record, timer) -> dict:
    """The project's decode (the grid frames; no MP4 to feed) and preprocessing of one clip."""
    with timer.part("project decode"):
        frames = dataset.decode_frames(record, record.frame_indices)
    with timer.part("project preprocess"):
        positions, caption_positions = evaluation_positions(len(record.frame_indices), NUM_SEGMENTS)
        sample = clip_sample(record, frames, positions, caption_positions, CLIP_SIZE, "clip", SAM_SIZE, "sam")
    return sample | {"decoded": frames}


def _equal_to_bf16(released: torch.Tensor, project: torch.Tensor, what: str) -> str:
    """Assert ``released`` (bf16) is ``project`` (float32) rounded to bf16, allowing the last float32
    bits of a different order of operations to round the other way; a summary."""
    if released.shape != project.shape:
        raise AssertionError(f"{what}: released {tuple(released.shape)} vs project {tuple(project.shape)}")
    gap = (released.float() - project).abs()
    bound = project.abs() * 2.0 ** -8 + 1e-6  # bf16's unit round-off, 8 significant bits
    if not bool((gap <= bound).all()):
        raise AssertionError(f"{what}: released and project differ by up to {gap.max():.3g} (beyond bf16 rounding)")
    same = int((released == project.bfloat16()).sum())
    return f"{what} {same / released.numel():.5%} bit-equal in bf16"


def check_equal(images: np.ndarray, released: dict[str, torch.Tensor], project: dict) -> str:
    """The released input of one clip against the project's preprocessing of the same decoded frames,
    and the caption's frames against the project's caption positions; what was checked."""
    global_project = preprocess_global(images, CLIP_SIZE, "clip").permute(1, 0, 2, 3)
    grounding_project = preprocess_grounding(images, SAM_SIZE, "sam").permute(1, 0, 2, 3)
    notes = [_equal_to_bf16(released["global"][0], global_project, "CLIP input"),
             _equal_to_bf16(released["grounding"][0], grounding_project, "SAM input")]
    if released["centre"].tolist() != project["caption_positions"].tolist():
        raise AssertionError(f"caption frames: released {released['centre'].tolist()} vs project "
                             f"{project['caption_positions'].tolist()}")
    decoded = np.abs(images.astype(np.int16) - project["decoded"].astype(np.int16))
    return (f"{'; '.join(notes)}; caption frames equal; decoded frames (ffmpeg CLI vs the project's PyAV): "
            f"{(decoded == 0).mean():.2%} of values equal, at most {decoded.max()} grey levels apart")


def compare(ffmpeg: str, video: Path, timer) -> tuple[int, int, str]:
    """Both procedures on every clip of ``video``; the clips' count, the ffmpeg processes started and
    :func:`check_equal`'s note on the first clip."""
    dataset = VideoFolderDataset(video, global_image_size=CLIP_SIZE, global_resize="clip",
                                 grounding_image_size=SAM_SIZE, grounding_resize="sam", on_error="raise")
    note, processes = "", 0
    for k, record in enumerate(dataset.records):
        if released_frame_ids(record) != record.frame_indices.tolist():
            raise AssertionError(f"{record.key}: released frames {released_frame_ids(record)} vs project "
                                 f"{record.frame_indices.tolist()}")
        project = project_clip(dataset, record, timer)
        images, released = released_clip(ffmpeg, video, record, timer)
        processes += len(images)
        if k == 0:
            note = check_equal(images, released, project)
    return len(dataset.records), processes, note
