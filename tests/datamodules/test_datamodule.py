"""Grounded-clip dataset, collate and DataModule: sample/batch contents, bad videos, phrase slots."""
import shutil

import numpy as np
import pytest
import torch

from callbacks.skipped_videos import SkippedVideoReport
from datamodules.grounded_dataset import GroundedClipDataset
from formats.records import read_records
from formats.video_reader import VideoDecodeError
from models.grove.clip_processing import GroundedCollate
from models.grove.prompting import GroundedCaptionPrompter, add_grove_tokens
from models.tiny_tokenizer import build_tiny_tokenizer


@pytest.fixture(scope="module")
def prompter(tmp_path_factory):
    tok = build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))
    add_grove_tokens(tok)
    return GroundedCaptionPrompter(tok, num_video_tokens=4, template="plain", sample_question=False)


@pytest.fixture()
def records(tiny_synthetic_root):
    return read_records(tiny_synthetic_root / "annotations" / "train.json")


def _dataset(records, root, **kw):
    kw.setdefault("global_image_size", 32)
    kw.setdefault("grounding_image_size", 64)
    return GroundedClipDataset(records, root, num_frames=4, **kw)


def test_training_sample_contents(records, tiny_synthetic_root):
    ds = _dataset(records, tiny_synthetic_root / "videos", train=True)
    r = records[0]
    s = ds[(0, 0)]
    assert s["global_frames"].shape == (4, 3, 32, 32) and s["global_frames"].dtype == torch.float32
    assert s["grounding_frames"].shape == (4, 3, 64, 64)
    assert s["boxes"].shape == (4, len(r.phrases), 4) and s["present"].dtype == torch.bool
    # frame indices lie on the 5-fps grid, one per segment
    grid = r.frame_indices.tolist()
    assert all(int(f) in grid for f in s["frame_indices"])
    # targets equal the record's boxes, normalised cxcywh, zero where absent
    boxes, present = r.phrase_boxes()
    pos = [grid.index(int(f)) for f in s["frame_indices"]]
    x1, y1, x2, y2 = np.moveaxis(boxes[pos], -1, 0)
    expected = np.stack([(x1 + x2) / 2 / r.width, (y1 + y2) / 2 / r.height,
                         (x2 - x1) / r.width, (y2 - y1) / r.height], -1)
    expected = expected * present[pos][..., None]
    assert np.allclose(s["boxes"].numpy(), expected, atol=1e-6)
    assert (s["present"].numpy() == present[pos]).all()
    # same (seed, epoch, index) -> same draw; another epoch -> (almost surely) another draw
    assert torch.equal(ds[(0, 0)]["frame_indices"], s["frame_indices"])
    assert any(not torch.equal(ds[(0, e)]["frame_indices"], s["frame_indices"]) for e in range(1, 6))


def test_eval_sample_has_every_annotated_frame(records, tiny_synthetic_root):
    ds = _dataset(records, tiny_synthetic_root / "videos", all_frames=True)
    s = ds[0]
    assert s["frame_indices"].tolist() == records[0].frame_indices.tolist()
    assert s["caption_positions"].tolist() == [1, 3, 6, 8]  # centres of 4 segments of 10 frames


def test_collate_shapes_dtypes_and_tokens(records, tiny_synthetic_root, prompter):
    ds = _dataset(records, tiny_synthetic_root / "videos", all_frames=True)
    batch = GroundedCollate(prompter)([ds[i] for i in range(3)])
    B, P = 3, max(len(r.phrases) for r in records[:3])
    assert batch["global_frames"].shape[:2] == (B, 10) and batch["boxes"].shape == (B, 10, P, 4)
    assert batch["phrase_mask"].dtype == torch.bool
    assert batch["phrase_mask"].sum(1).tolist() == [len(r.phrases) for r in records[:3]]
    assert batch["frame_mask"].all() and batch["size"].tolist() == [[128, 128]] * 3
    ids, labels = batch["input_ids"], batch["labels"]
    assert ids.shape == labels.shape == batch["attention_mask"].shape and ids.dtype == torch.long
    # one [DET] per phrase; the prompt (incl. video placeholders) carries no loss
    assert ((ids == prompter.det_token_id).sum(1) == batch["phrase_mask"].sum(1)).all()
    assert (labels[ids == prompter.video_token_id] == -100).all()
    assert (batch["prompt_attention_mask"][:, -1] == 1).all()  # left-padded prompts


def test_phrase_slots_follow_tagged_order_with_repeats(records, tiny_synthetic_root):
    r = records[0]
    phrase = r.phrases[0]
    r2 = type(r).from_dict({**r.to_dict(), "tagged_caption": r.tagged_caption + f" Later <p>{phrase}</p> again."})
    s = _dataset([r2], tiny_synthetic_root / "videos")[0]
    assert s["phrases"][-1] == phrase and len(s["phrases"]) == len(r.phrases) + 1
    assert torch.equal(s["boxes"][:, -1], s["boxes"][:, 0]) and torch.equal(s["present"][:, -1], s["present"][:, 0])


@pytest.fixture()
def broken_root(tmp_path, records, tiny_synthetic_root):
    root = tmp_path / "videos"
    shutil.copytree(tiny_synthetic_root / "videos", root)
    (root / records[1].video_fname).write_bytes(np.random.default_rng(0).bytes(5000))  # corrupt
    (root / records[2].video_fname).unlink()  # missing
    return root


def test_corrupt_and_missing_videos_are_skipped_and_counted(records, broken_root, recwarn):
    train = _dataset(records, broken_root, train=True)
    s = train[(1, 0)]  # corrupt -> missing -> substituted by clip 3
    assert s["key"] == records[3].key
    assert [k for k, _ in s["skipped"]] == [records[1].key, records[2].key]
    ev = _dataset(records, broken_root, all_frames=True)
    batch = GroundedCollate()([ev[i] for i in range(4)])
    assert batch["keys"] == [records[0].key, records[3].key]
    assert sorted(k for k, _ in batch["skipped"]) == sorted([records[1].key, records[2].key])

    report = SkippedVideoReport()

    class _Trainer:
        logger = None
        current_epoch = 0
        global_step = 0

    report.on_validation_batch_end(_Trainer(), None, None, batch, 0)
    report.on_validation_batch_end(_Trainer(), None, None, batch, 1)  # same clips again: counted once
    with pytest.warns(UserWarning, match="skipped 2 clip"):
        report.on_validation_epoch_end(_Trainer(), None)
    assert report.totals["val"] == 2


def test_raise_mode(records, broken_root):
    ds = _dataset(records, broken_root, train=True, on_error="raise")
    with pytest.raises(VideoDecodeError, match=records[1].video_fname.split(".")[0]):
        ds[(1, 0)]
