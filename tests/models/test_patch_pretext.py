"""The demo towers' pretext: word targets per patch, the loss, and the checkpoints it writes."""
import json
from pathlib import Path

import pytest
import torch

from models.patch_pretext import (
    MOTION_WORDS,
    PatchBoxHead,
    PatchWordHead,
    build_word_vocabulary,
    patch_box_targets,
    patch_word_targets,
    phrase_word_matrix,
    phrase_words,
)


def test_phrase_words_and_vocabulary():
    assert phrase_words("An Orange  cross") == ["orange", "cross"]
    assert phrase_words("the man's hat") == ["man", "s", "hat"]
    vocab = build_word_vocabulary(["a red circle", "a red square", "the blue circle"], min_count=2)
    assert vocab == ["circle", "red"]
    words = phrase_word_matrix([["a red circle", "a blue square"], ["a red square"]], ["circle", "red", "square"], 3)
    assert words.shape == (2, 3, 3)
    assert words[0].tolist() == [[1, 1, 0], [0, 0, 1], [0, 0, 0]]  # unknown "blue" dropped, slot 3 padded
    assert words[1].tolist() == [[0, 1, 1], [0, 0, 0], [0, 0, 0]]


def test_patch_targets_hand_computed():
    # 4x4 grid; patch centres at 0.125, 0.375, 0.625, 0.875 on both axes.
    boxes = torch.tensor([[[[0.25, 0.25, 0.5, 0.5],     # covers centres x,y in {0.125, 0.375}
                            [0.75, 0.625, 0.3, 0.3]]]])  # x in [0.6, 0.9), y in [0.475, 0.775): x 0.625/0.875, y 0.625
    present = torch.tensor([[[True, True]]])
    words = torch.tensor([[[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]])
    t = patch_word_targets(boxes, present, words, (4, 4))
    assert t.shape == (1, 1, 4, 4, 3)
    expected = torch.zeros(4, 4, 3)
    expected[:2, :2] = torch.tensor([1.0, 0.0, 1.0])
    expected[2, 2:] = torch.tensor([0.0, 1.0, 1.0])
    assert torch.equal(t[0, 0], expected)
    # an absent phrase marks nothing; overlapping phrases take the union of their words
    assert patch_word_targets(boxes, torch.tensor([[[False, False]]]), words, (4, 4)).sum() == 0
    both = patch_word_targets(torch.tensor([[[[0.5, 0.5, 1.0, 1.0], [0.5, 0.5, 0.3, 0.3]]]]), present, words, (4, 4))
    assert both[0, 0, 1, 1].tolist() == [1.0, 1.0, 1.0] and both[0, 0, 0, 0].tolist() == [1.0, 0.0, 1.0]


def test_patch_targets_by_overlap_hand_computed():
    # 4x4 grid of 0.25-wide patches. A 0.1 box at (0.3, 0.3) holds no patch centre but lies inside
    # patch (1, 1); a 0.25 x 0.2 box at (0.725, 0.5) spans x [0.6, 0.85), y [0.4, 0.6): it shares
    # 0.15 x 0.1 = 0.015 of its 0.05 area (0.3) with each of patches (1, 2), (2, 2), and 0.1 x 0.1
    # = 0.01 (0.2) with (1, 3) and (2, 3).
    boxes = torch.tensor([[[[0.3, 0.3, 0.1, 0.1], [0.725, 0.5, 0.25, 0.2]]]])
    present = torch.tensor([[[True, True]]])
    words = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    assert patch_word_targets(boxes, present, words, (4, 4))[0, 0, :, :, 0].sum() == 0  # the centre rule misses it
    t = patch_word_targets(boxes, present, words, (4, 4), min_overlap=0.25)[0, 0]
    first = torch.zeros(4, 4)
    first[1, 1] = 1
    second = torch.zeros(4, 4)
    second[1:3, 2] = 1
    assert torch.equal(t[..., 0], first) and torch.equal(t[..., 1], second)
    second[1:3, 3] = 1
    assert torch.equal(patch_word_targets(boxes, present, words, (4, 4), min_overlap=0.15)[0, 0, ..., 1], second)
    # a patch inside a large box shares all of its own area: the smaller of the two areas counts
    whole = patch_word_targets(torch.tensor([[[[0.5, 0.5, 1.0, 1.0]]]]), present[..., :1], words[:, :1], (4, 4),
                               min_overlap=0.9)
    assert whole[0, 0, ..., 0].sum() == 16
    assert patch_word_targets(boxes, torch.zeros(1, 1, 2, dtype=torch.bool), words, (4, 4), min_overlap=0.2).sum() == 0


def test_patch_targets_follow_bottom_right_padding():
    # A frame twice as wide as high, padded to a square: it covers the top half of the input.
    boxes = torch.tensor([[[[0.5, 0.5, 1.0, 1.0]]]])  # the whole frame
    t = patch_word_targets(boxes, torch.ones(1, 1, 1, dtype=torch.bool), torch.ones(1, 1, 1), (4, 4),
                           frame_fraction=torch.tensor([[0.5, 1.0]]))
    assert t[0, 0, :, :, 0].tolist() == [[1] * 4, [1] * 4, [0] * 4, [0] * 4]


def test_patch_box_targets_take_the_smallest_visible_box():
    # 4x4 grid, centres at 0.125 .. 0.875. Box 0 covers the top-left 2x2 patches; box 1 (smaller)
    # covers only the centre (0.375, 0.375); box 2 would cover the bottom-right patch but is absent.
    big, small, gone = [0.25, 0.25, 0.5, 0.5], [0.375, 0.375, 0.3, 0.3], [0.875, 0.875, 0.2, 0.2]
    boxes = torch.tensor([[[big, small, gone]]])
    targets, covered = patch_box_targets(boxes, torch.tensor([[[True, True, False]]]), (4, 4))
    assert targets.shape == (1, 1, 4, 4, 4) and covered.shape == (1, 1, 4, 4)
    expected_cover = torch.zeros(4, 4, dtype=torch.bool)
    expected_cover[:2, :2] = True
    assert torch.equal(covered[0, 0], expected_cover)
    for y, x in ((0, 0), (0, 1), (1, 0)):
        assert torch.equal(targets[0, 0, y, x], torch.tensor(big))
    assert torch.equal(targets[0, 0, 1, 1], torch.tensor(small))  # both cover it: the smaller wins
    assert targets[0, 0][~expected_cover].abs().sum() == 0
    # with the frame in the top half of a padded square input, only the top two rows are frame
    whole = torch.tensor([[[[0.5, 0.5, 1.0, 1.0]]]])
    _, covered = patch_box_targets(whole, torch.ones(1, 1, 1, dtype=torch.bool), (4, 4),
                                   frame_fraction=torch.tensor([[0.5, 1.0]]))
    assert covered[0, 0].sum(dim=1).tolist() == [4, 4, 0, 0]


def test_patch_box_head_loss_hand_computed():
    head = PatchBoxHead(3)
    targets = torch.zeros(1, 2, 1, 2, 4)
    targets[0, 0, 0, 0] = torch.tensor([0.5, 0.5, 0.2, 0.2])
    targets[0, 1, 0, 1] = torch.tensor([0.1, 0.1, 0.1, 0.1])
    covered = targets.abs().sum(-1) > 0
    pred = torch.full_like(targets, 0.3)
    # |0.2|+|0.2|+|0.1|+|0.1| = 0.6 on the first covered patch, 4 x 0.2 = 0.8 on the second
    assert torch.isclose(head.loss(pred, targets, covered), torch.tensor(0.7))
    assert torch.isclose(head.loss(pred, targets, covered, frame_mask=torch.tensor([[True, False]])),
                         torch.tensor(0.6))
    assert head.loss(pred, targets, torch.zeros_like(covered)) == 0
    assert head(torch.randn(5, 3)).shape == (5, 4)


def test_head_loss_and_accuracy():
    head = PatchWordHead(4, 3, pos_weight=1.0)
    targets = torch.zeros(1, 2, 1, 2, 3)
    targets[0, 0, 0, 0] = torch.tensor([1.0, 0.0, 1.0])
    logits = torch.full_like(targets, -5.0)
    logits[0, 0, 0, 0] = torch.tensor([5.0, -5.0, 5.0])
    loss, stats = head.loss(logits, targets)
    expected = torch.nn.functional.binary_cross_entropy_with_logits(logits, targets, reduction="sum") / 12
    assert torch.isclose(loss, expected) and stats["word_f1"].item() == 1.0
    # a masked frame does not count
    logits[0, 1] = 5.0
    masked, stats = head.loss(logits, targets, frame_mask=torch.tensor([[True, False]]))
    assert stats["word_f1"].item() == 1.0  # the wrong words are in the masked frame
    _, stats = head.loss(logits, targets)
    assert abs(stats["word_f1"].item() - 2 * 2 / (2 + 8)) < 1e-6  # 2 hits, 2 + 6 predicted, 2 actual
    assert torch.isclose(masked, torch.nn.functional.binary_cross_entropy_with_logits(
        logits[0, 0], targets[0, 0], reduction="sum") / 6)


@pytest.mark.slow
def test_pretrain_towers_writes_checkpoints_the_real_loaders_read(tiny_synthetic_root, tmp_path):
    from cli import cli_main
    from lightning_modules.tower_pretraining import main
    from tests.fixtures.tiny_cli import tiny_cli_args

    out = tmp_path / "towers"
    overrides = tiny_cli_args(tiny_synthetic_root, tmp_path)[2:]  # without --config
    # the demo passes its overrides on, the paths of the checkpoints this stage writes included
    to_write = [f"--model.init_args.global_encoder.checkpoint={out / 'open_clip_vision.bin'}",
                f"--model.init_args.grounding_encoder.checkpoint={out / 'sam_image_encoder.pth'}"]
    report = main(["--steps", "3", "--out", str(out), "--", *overrides, *to_write])
    assert report["box_weight"] > 0 and report["final"]["grounding_box_l1"] > 0
    assert json.loads((out / "pretext.json").read_text())["steps"] == 3
    assert "circle" in report["vocabulary"] or "square" in report["vocabulary"]
    cli = cli_main([*tiny_cli_args(tiny_synthetic_root, tmp_path),
                    f"--model.init_args.global_encoder.checkpoint={out / 'open_clip_vision.bin'}",
                    f"--model.init_args.grounding_encoder.checkpoint={out / 'sam_image_encoder.pth'}"], run=False)
    glob = torch.load(out / "open_clip_vision.bin")
    grnd = torch.load(out / "sam_image_encoder.pth")
    model = cli.model.model
    for k, v in model.global_encoder.backbone.state_dict().items():
        assert torch.equal(v, glob[f"visual.{k}"]), k
    for k, v in model.grounding_encoder.backbone.state_dict().items():
        assert torch.equal(v, grnd[f"image_encoder.{k}"]), k
    # and the pretext moved the towers away from a fresh random start
    fresh = cli_main(tiny_cli_args(tiny_synthetic_root, tmp_path), run=False).model.model
    assert not torch.equal(fresh.global_encoder.backbone.conv1.weight, model.global_encoder.backbone.conv1.weight)


def test_null_checkpoint_override_means_no_file(tmp_path):
    from cli import cli_main
    from tests.fixtures.paths import ROOT

    cli = cli_main(["--config", str(ROOT / "configs" / "demo.yaml"),
                    "--model.init_args.global_encoder.checkpoint=null",
                    "--model.init_args.grounding_encoder.checkpoint=None",
                    f"--trainer.logger.init_args.save_dir={tmp_path}"], run=False)
    assert cli.model.model.global_encoder.config.checkpoint is None
    assert cli.model.model.grounding_encoder.config.checkpoint is None


@pytest.mark.slow
def test_pretrain_judge_vision_writes_a_tower_the_judge_loads(tiny_synthetic_root, tmp_path):
    from cli import cli_main
    from command_line.pretrain_judge_vision import main
    from tests.fixtures.paths import ROOT

    out = tmp_path / "judge_towers"
    overrides = ["--data.init_args.synthetic={num_train: 6, num_val: 2, num_test: 2, duration_s: 2.0, workers: 1}",
                 f"--data.init_args.synthetic_root={tiny_synthetic_root}", "--data.init_args.num_workers=0",
                 "--data.init_args.num_frames=4"]
    report = main(["--steps", "2", "--batch-size", "2", "--min-overlap", "0.5", "--out", str(out), "--", *overrides])
    assert report["steps"] == 2 and "word_f1" in report["final"] and report["min_overlap"] == 0.5
    assert report["motion"] and report["vocabulary"][-7:] == [f"motion:{w}" for w in MOTION_WORDS]
    saved = torch.load(out / "qwen_vision.bin")
    cli = cli_main(["--config", str(ROOT / "configs" / "judge_demo.yaml"),
                    f"--model.init_args.vision_checkpoint={out / 'qwen_vision.bin'}", *overrides], run=False)
    tower = cli.model.judge.vision_tower().state_dict()
    assert tower and all(torch.equal(v, saved[f"model.visual.{k}"]) for k, v in tower.items())
    with pytest.raises(FileNotFoundError, match="model.init_args.vision_checkpoint.*The VC-Inspector judge"):
        cli_main(["--config", str(ROOT / "configs" / "judge_demo.yaml"),
                  f"--model.init_args.vision_checkpoint={tmp_path / 'missing.bin'}", *overrides], run=False)


def test_pretext_optimizer_warms_up_then_decays_to_zero():
    from models.patch_pretext import pretext_optimizer

    weight = torch.nn.Parameter(torch.zeros(2), requires_grad=False)
    optimizer, schedule = pretext_optimizer([weight], lr=1.0, steps=20)
    assert weight.requires_grad
    lrs = []
    for _ in range(21):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert lrs[0] == pytest.approx(0.5) and lrs[1] == pytest.approx(1.0)  # warm-up over 2 steps
    assert lrs[11] == pytest.approx(0.5) and lrs[20] == pytest.approx(0.0)  # linear decay from step 2 to 20


def test_demo_finds_the_tower_checkpoints_it_must_write():
    from command_line.demo import ROOT, configured_towers

    assert configured_towers([]) == (ROOT / "data" / "demo_towers" / "open_clip_vision.bin",
                                     ROOT / "data" / "demo_towers" / "sam_image_encoder.pth")
    moved = configured_towers(["--trainer.max_steps=5", "--model.init_args.global_encoder.checkpoint=/x/g.bin",
                               "--model.init_args.grounding_encoder.checkpoint=rel/s.pth"])
    assert moved == (Path("/x/g.bin"), ROOT / "rel" / "s.pth")
    assert configured_towers(["--model.init_args.global_encoder.checkpoint=null"]) is None


def test_demo_pretrains_towers_again_when_their_recipe_changed(tmp_path):
    from command_line.demo import TOWER_BOX_WEIGHT, TOWER_STEPS, stale_towers

    assert "missing" in stale_towers(tmp_path)
    record = tmp_path / "pretext.json"
    record.write_text(json.dumps({"steps": TOWER_STEPS, "box_weight": TOWER_BOX_WEIGHT, "seconds": 1.0}))
    assert stale_towers(tmp_path) is None
    record.write_text(json.dumps({"steps": TOWER_STEPS}))  # written before the box target existed
    assert "box_weight" in stale_towers(tmp_path)
    record.write_text("{not json")
    assert "not valid JSON" in stale_towers(tmp_path)


def test_slice_motion_words_by_hand():
    from models.patch_pretext import slice_motion_words

    boxes = torch.zeros(1, 6, 2, 4)
    present = torch.zeros(1, 6, 2, dtype=torch.bool)
    # object 0: right by 0.1 (frames 0-1), up by 0.1 (2-3; y grows downwards), a 0.05 x 0.05 tie -> horizontal, left
    boxes[0, :, 0, :2] = torch.tensor([[0.2, 0.5], [0.3, 0.5], [0.3, 0.5], [0.3, 0.4], [0.5, 0.5], [0.45, 0.55]])
    present[0, :, 0] = True
    # object 1: appears (frames 0-1), moves 0.01 < still (2-3), disappears (4-5)
    boxes[0, :, 1, :2] = torch.tensor([[0.0, 0.0], [0.5, 0.5], [0.5, 0.5], [0.51, 0.5], [0.5, 0.5], [0.0, 0.0]])
    present[0, :, 1] = torch.tensor([False, True, True, True, True, False])
    words = slice_motion_words(boxes, present, temporal_patch=2)
    assert words.shape == (1, 3, 2, len(MOTION_WORDS))
    named = [[[MOTION_WORDS[i] for i in range(len(MOTION_WORDS)) if words[0, t, p, i]] for p in range(2)]
             for t in range(3)]
    assert named == [[["right"], ["appears"]], [["up"], ["still"]], [["left"], ["disappears"]]]
    # the 0.01 step is motion under a finer threshold; an object absent throughout does nothing
    assert slice_motion_words(boxes, present, 2, still=0.005)[0, 1, 1].nonzero().flatten().tolist() == [1]
    assert slice_motion_words(boxes, torch.zeros_like(present), 2).sum() == 0
    with pytest.raises(ValueError, match="temporal patches"):
        slice_motion_words(boxes, present, temporal_patch=4)
