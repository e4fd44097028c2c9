"""The pointing benchmarks' frame protocol, dataset and predict mode (YouCook-Interactions, GroundingYouTube)."""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from datamodules.pointing import PointingClipDataset, PointingCollate, PointingDataModule, pointing_answer
from datamodules.synthetic_pointing import generate_pointing_dataset
from formats.pointing_records import closest_samples, frame_at_seconds, read_pointing_records, sample_timestamps
from lightning_modules.pointing import pixel_corners, pointing_predictions
from models.grove import Grove
from models.grove.clip_processing import GroundedCollate
from models.grove.configuration import model_configs_from_yaml
from models.grove.prompting import OFFICIAL_POINTING_QUESTION
from models.grove.windows import clip_windows

ROOT = Path(__file__).resolve().parents[2]
TINY = [ROOT / "configs" / "official" / "tiny.yaml"]


def test_sampling_from_pts_hand_cases():
    pts = [i / 30 for i in range(14)]  # 30 fps: every 6th timestamp, then the last
    assert sample_timestamps(pts, 30.0).tolist() == [pts[0], pts[6], pts[12], pts[13]]
    pts = [i / 25 for i in range(11)]  # 25 fps: stride 5 reaches the last one itself: no repeat
    assert sample_timestamps(pts, 25.0).tolist() == [pts[0], pts[5], pts[10]]
    assert sample_timestamps([0.0, 0.1, 0.2, 0.3], 29.97).tolist() == [0.0, 0.3]  # int(5.994) = 5
    assert sample_timestamps([0.0, 0.5, 1.0], 2.0).tolist() == [0.0, 0.5, 1.0]  # slower than 5 fps: all
    assert sample_timestamps([7.0], 30.0).tolist() == [7.0]


def test_closest_timestamp_pick_hand_cases():
    sampled = [0.0, 0.25, 0.5, 0.75, 1.5]
    # 0.625 lies exactly between 0.5 and 0.75 (binary fractions): the first (earliest) wins the tie
    assert closest_samples(sampled, [0.0, 0.3, 0.625, 1.1, 3.0, -1.0]).tolist() == [0, 1, 2, 3, 4, 0]
    assert closest_samples([1.0, 2.0, 3.0], [2.5]).tolist() == [1]
    same_as_min = [min(range(5), key=lambda j: abs(sampled[j] - s)) for s in (0.5, 0.7, 0.9)]
    assert closest_samples(sampled, [0.5, 0.7, 0.9]).tolist() == same_as_min


def test_frame_at_seconds_is_the_frame_shown_from_then():
    fps = 29.97
    assert frame_at_seconds(np.arange(40) / fps, fps).tolist() == list(range(40))
    assert frame_at_seconds([0.0, 0.01, 1 / 30 + 1e-9, 1.0], 30.0).tolist() == [0, 1, 1, 30]


def released_windows(num_frames: int, T: int = 8) -> tuple[list[list[int]], list[list[int]]]:
    """The released pointing inference's sliding_segment_with_mask, restated as loops (the reference)."""
    if num_frames <= T:
        return ([list(range(num_frames)) + [num_frames - 1] * (T - num_frames)],
                [[1 if i < num_frames else 0 for i in range(T)]])
    size, rest = divmod(num_frames, T)
    windows, masks, seen = [], [], set()
    for offset in range(size):
        windows.append([i * size + offset for i in range(T)])
    for offset in range(rest):
        windows.append([i * size + size + offset for i in range(T) if i * size + size + offset < num_frames])
    for w in windows:
        masks.append([0 if f in seen else 1 for f in w])
        seen.update(w)
    return windows, masks


@pytest.mark.parametrize("num_frames", list(range(1, 60)))
def test_official_pointing_windows_match_the_released_scheme(num_frames):
    positions, keep, caption = clip_windows(num_frames, 8, "official_pointing")
    windows, masks = released_windows(num_frames)
    assert caption is None
    assert positions.tolist() == windows and keep.int().tolist() == masks
    kept = positions[keep].sort().values
    assert kept.tolist() == list(range(num_frames))  # each frame predicted exactly once


@pytest.fixture(scope="module")
def synthetic_youcook(tmp_path_factory) -> Path:
    return generate_pointing_dataset(tmp_path_factory.mktemp("youcook"), "youcook", num_clips=3, duration_s=2.0)


def test_dataset_reads_the_sampled_frames(synthetic_youcook):
    records = read_pointing_records(synthetic_youcook, "youcook")
    dataset = PointingClipDataset(records, synthetic_youcook.parent / "videos", num_frames=8, global_image_size=56,
                                  global_resize="clip", grounding_image_size=64, grounding_resize="sam",
                                  on_error="raise")
    sample = dataset[1]
    record = records[1]
    sampled = sample_timestamps(record.pts, record.fps)
    assert sample["key"] == f"{record.video_id}_1" and sample["answer"] == "<p> move the green square </p> [DET]"
    assert sample["frame_indices"].tolist() == np.round(sampled * record.fps).astype(int).tolist()
    assert sample["global_frames"].shape == (len(sampled), 3, 56, 56)
    assert sample["grounding_frames"].shape == (len(sampled), 3, 64, 64)
    batch = PointingCollate()([dataset[0], sample])
    assert batch["answers"] == [pointing_answer(r.caption) for r in records[:2]]
    assert batch["frame_mask"].sum(1).tolist() == [len(s) for s in batch["sampled_pts"]]
    plain = GroundedCollate()([sample])
    assert "answers" not in plain


def test_answer_is_forced_as_written_after_the_pointing_question():
    """The caption is forced as ``<p> caption </p> [DET]`` + EOS (stripped, case and inner spacing
    kept) after the benchmarks' own question."""
    model = Grove(**model_configs_from_yaml(TINY)).eval()
    prompter = model.prompter
    answer = pointing_answer("  Add  Salt ")
    assert answer == "<p> Add  Salt </p> [DET]"
    ids = prompter.encode_training([answer], formatted=True, question=OFFICIAL_POINTING_QUESTION)["input_ids"][0]
    prompt = prompter.prompt_ids(OFFICIAL_POINTING_QUESTION)
    expected = prompter.tokenizer(" " + answer, add_special_tokens=False)["input_ids"]
    assert ids.tolist() == [*prompt, *expected, prompter.tokenizer.eos_token_id]
    assert prompt != prompter.prompt_ids(prompter.questions[0])


def test_pointing_input_ids_equal_the_released_ones_on_the_real_vocabulary():
    """The released tokenize_prompt: LLaVA-v1 conversation with the pointing question and the answer."""
    from models.grove.language_model import load_tokenizer_folder
    from models.grove.official_tokenization import OfficialRules
    from models.grove.prompting import GroundedCaptionPrompter, add_grove_tokens
    from tests.fixtures.llama_vocabulary import llama_tokenizer_root

    folder = llama_tokenizer_root() / "glamm"
    rules = OfficialRules(folder / "tokenizer.model")
    tokenizer = load_tokenizer_folder(folder)
    add_grove_tokens(tokenizer, "official")
    prompter = GroundedCaptionPrompter(tokenizer, 1, template="llava_v1", style="official", sample_question=False)
    for caption in ("cut the onion", " Add  the salt to the pan. ", "stir (slowly) 2 times"):
        answer = pointing_answer(caption)
        ids = prompter.encode_training([answer], formatted=True, question=OFFICIAL_POINTING_QUESTION)
        assert ids["input_ids"][0].tolist() == rules.training(OFFICIAL_POINTING_QUESTION, answer)[0]


def test_pointing_predictions_pick_the_nearest_frame(synthetic_youcook):
    torch.manual_seed(0)
    model = Grove(**model_configs_from_yaml(TINY)).eval()
    records = read_pointing_records(synthetic_youcook, "youcook")
    dataset = PointingClipDataset(records, synthetic_youcook.parent / "videos", num_frames=8, global_image_size=56,
                                  global_resize="clip", grounding_image_size=64, grounding_resize="sam")
    batch = PointingCollate(model.prompter)([dataset[0], dataset[2]])
    preds = pointing_predictions(model, batch)
    assert list(preds) == [records[0].key, records[2].key]
    out = model.predict(batch["global_frames"], batch["grounding_frames"], batch["frame_mask"], window=8,
                        window_mode="official_pointing", answers=batch["answers"], question=OFFICIAL_POINTING_QUESTION)
    for i, record in enumerate((records[0], records[2])):
        pred = preds[record.key]
        n = int(batch["frame_mask"][i].sum())
        corners = pixel_corners(out.boxes[i:i + 1, :n, 0], batch["size"][i:i + 1].float())[0]
        sampled = sample_timestamps(record.pts, record.fps)
        assert len(pred["frames"]) == n and pred["phrases"] == [record.caption.strip()]
        assert len(pred["final_boxes"]) == len(record.target_seconds)
        for second, box, chosen in zip(record.target_seconds, pred["final_boxes"], pred["selected_pts"]):
            j = min(range(n), key=lambda k: abs(sampled[k] - second))
            assert chosen == sampled[j]
            assert np.allclose(box[0], corners[j].tolist(), atol=1e-4)
    # unclipped corners, scaled before the conversion: (cx, cy, w, h) = (0.5, 0.5, 1.5, 0.5) on 100 x 80
    assert pixel_corners(torch.tensor([[[0.5, 0.5, 1.5, 0.5]]]), torch.tensor([[100.0, 80.0]])).tolist() == \
        [[[-25.0, 20.0, 125.0, 60.0]]]


@pytest.mark.slow
def test_predict_and_score_through_the_cli(synthetic_youcook, tmp_path):
    from cli import cli_main
    from metrics.protocols.pointing import evaluate_files

    cli_main(["predict", "--config", str(TINY[0]),
              "--config", str(ROOT / "configs" / "overlays" / "youcook_interactions.yaml"),
              f"--data.init_args.test_annotations={synthetic_youcook}",
              f"--data.init_args.video_root={synthetic_youcook.parent / 'videos'}",
              "--data.init_args.num_workers=0", f"--trainer.logger.init_args.save_dir={tmp_path}",
              "--trainer.enable_progress_bar=false"])
    path = next(tmp_path.rglob("predictions_predict.json"))
    preds = json.loads(path.read_text())
    assert sorted(preds) == sorted(r.key for r in read_pointing_records(synthetic_youcook, "youcook"))
    report = evaluate_files(synthetic_youcook, path, "youcook", missing="error")
    entries = pickle.loads(synthetic_youcook.read_bytes())
    assert report["valid"] == sum(b is not None for e in entries for b in e["segment_bboxes"])
    with pytest.raises(ValueError, match="serves `cli.py predict` only"):
        PointingDataModule(test_annotations=str(synthetic_youcook)).setup("test")
