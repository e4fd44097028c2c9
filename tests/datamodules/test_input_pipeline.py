"""The training input pipeline gives the model exactly what a plain reference computes for a seed:
the sampled grid frames decoded from scratch, resized with PIL and normalised, whatever readers
the dataset keeps open and in whatever order clips are read."""
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from datamodules.grounded_dataset import OPEN_VIDEOS, GroundedClipDataset
from formats.records import GroundedRecord
from formats.video_reader import PyAVVideoSource
from formats.video_writer import write_video
from models.grove.clip_processing import GroundedCollate
from models.grove.frame_sampling import sample_rng, sample_segment_frames
from models.grove.image_processing import CLIP_MEAN, CLIP_STD, SAM_MEAN, SAM_STD

FPS, W, H = 10, 90, 60


def textured(n, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 255, (n, H, W, 3), dtype=np.uint8)


def record(video, start, end, index, visible_from=0):
    n = len(range(start, end + 1, 2))
    box = np.array([[10, 10, 40, 30]], np.float32)
    boxes = [box if i >= visible_from else np.zeros((0, 4), np.float32) for i in range(n)]
    return GroundedRecord(video_fname=video, video_id=Path(video).stem, clip_id=str(index), fps=float(FPS),
                          clip_start_frame=start, clip_end_frame=end, width=W, height=H, caption="a dot moves.",
                          tagged_caption="<p>a dot</p> moves.", phrases=["a dot"], bboxes=boxes,
                          labels=[["a dot"] if len(b) else [] for b in boxes])


def reference(root, rec, seed, epoch, index, global_size=32, grounding_size=48):
    """The sample's frames by the plain procedure: decode every frame, take the drawn ones, PIL resize."""
    with PyAVVideoSource(root / rec.video_fname) as video:
        every = video.read_all()
    visible = np.array([len(b) > 0 for b in rec.bboxes])
    positions = sample_segment_frames(len(rec.bboxes), 4, True, sample_rng(seed, epoch, index), visible, 10)
    frames = every[np.minimum(rec.frame_indices[positions], len(every) - 1)]
    # CLIP: shortest side to global_size (the other truncated), bicubic, centre crop, normalise
    short = min(H, W)
    size = (global_size, int(global_size * W / short)) if H <= W else (int(global_size * H / short), global_size)
    big = torch.from_numpy(np.stack([np.asarray(Image.fromarray(f).resize(size[::-1], Image.Resampling.BICUBIC))
                                     for f in frames])).permute(0, 3, 1, 2).float()
    top, left = (size[0] - global_size) // 2, (size[1] - global_size) // 2
    crop = big[..., top:top + global_size, left:left + global_size]
    clip = (crop - torch.tensor(CLIP_MEAN).view(1, 3, 1, 1) * 255.0) / (torch.tensor(CLIP_STD).view(1, 3, 1, 1) * 255.0)
    # SAM: longest side to grounding_size (rounded half up), bilinear, normalise, zero pad bottom-right
    scale = grounding_size / max(H, W)
    gh, gw = int(H * scale + 0.5), int(W * scale + 0.5)
    small = torch.from_numpy(np.stack([np.asarray(Image.fromarray(f).resize((gw, gh), Image.Resampling.BILINEAR))
                                       for f in frames])).permute(0, 3, 1, 2).float()
    sam = torch.zeros(len(frames), 3, grounding_size, grounding_size)
    sam[..., :gh, :gw] = (small - torch.tensor(SAM_MEAN).view(1, 3, 1, 1)) / torch.tensor(SAM_STD).view(1, 3, 1, 1)
    return rec.frame_indices[positions], clip, sam


@pytest.fixture
def clips(tmp_path):
    for v in range(OPEN_VIDEOS + 2):  # more videos than a dataset keeps open
        write_video(tmp_path / f"v{v}.mp4", textured(60, v), FPS, gop=7)
    records = [record(f"v{v}.mp4", start, start + 23, k, visible_from=k % 3)
               for k, (v, start) in enumerate((v, s) for v in range(OPEN_VIDEOS + 2) for s in (0, 17, 36))]
    return tmp_path, records


def dataset(root, records, seed=5):
    return GroundedClipDataset(records, root, num_frames=4, train=True, seed=seed, global_image_size=32,
                               global_resize="clip", grounding_image_size=48, grounding_resize="sam", on_error="raise")


@pytest.mark.parametrize("order", ["in_turn", "shuffled"])
def test_samples_equal_the_plain_reference_bit_for_bit(clips, order):
    root, records = clips
    data = dataset(root, records)
    items = list(range(len(records)))
    if order == "shuffled":
        items = list(np.random.default_rng(1).permutation(items)) * 2  # clips of a video apart, and read twice
    for epoch, index in [(e, int(i)) for e, i in enumerate(items)]:
        sample = data[(index, epoch)]
        frames, clip, sam = reference(root, records[index], 5, epoch, index)
        np.testing.assert_array_equal(sample["frame_indices"].numpy(), frames)
        assert torch.equal(sample["global_frames"], clip)
        assert torch.equal(sample["grounding_frames"], sam)
    assert len(data._readers) == OPEN_VIDEOS  # readers were kept, no more than the limit


def test_a_video_rewritten_on_disk_is_reopened(clips):
    root, records = clips
    data = dataset(root, records)
    data[0]
    write_video(root / records[0].video_fname, textured(60, 99), FPS, gop=7)
    frames, clip, _ = reference(root, records[0], 5, 0, 0)
    assert torch.equal(data[0]["global_frames"], clip)


def test_collate_of_equal_sized_samples_equals_padding(clips):
    root, records = clips
    data = dataset(root, records)
    samples = [data[i] for i in range(3)]
    batch = GroundedCollate(None, train=True)(samples)
    for key in ("global_frames", "grounding_frames", "boxes", "present"):
        assert torch.equal(batch[key], torch.stack([s[key] for s in samples]))
    ragged = GroundedCollate(None)([samples[0], {**samples[1], "global_frames": samples[1]["global_frames"][:2]}])
    assert ragged["global_frames"].shape == (2, 4, 3, 32, 32)
    assert (ragged["global_frames"][1, 2:] == 0).all()
