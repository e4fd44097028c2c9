"""The toy judge's vision-stage targets: per merged video token, the covering objects' words and motion."""
import pytest
import torch

from judge.training.vision_pretext import merged_token_targets
from models.patch_pretext import MOTION_WORDS


def test_merged_token_targets_follow_the_vision_token_order():
    # 4 frames of an 8x8-patch grid -> 2 temporal x 4 x 4 merged tokens (merge 2, temporal patch 2)
    boxes = torch.zeros(1, 4, 1, 4)
    boxes[0, 1, 0] = torch.tensor([0.125, 0.125, 0.25, 0.25])  # top-left merged cell, frame 1 only
    boxes[0, 3, 0] = torch.tensor([0.875, 0.875, 0.25, 0.25])  # bottom-right merged cell, frame 3 only
    present = torch.tensor([[[False], [True], [False], [True]]])
    batch = {"boxes": boxes, "present": present}
    targets = merged_token_targets(batch, torch.ones(1, 1, 1), torch.tensor([[2, 8, 8]]), temporal_patch=2, merge=2)
    assert targets.shape == (32, 1 + len(MOTION_WORDS))
    expected = torch.zeros(32)
    expected[0] = 1.0  # t=0 (frames 0-1), row 0, col 0
    expected[16 + 15] = 1.0  # t=1 (frames 2-3), row 3, col 3
    assert torch.equal(targets[:, 0], expected)
    # each object appears within its token's two frames (absent in the first, present in the second)
    appears = MOTION_WORDS.index("appears")
    assert targets[:, 1:].nonzero().tolist() == [[0, appears], [31, appears]]
    # a small object off the cell centres is named in the cell it shares half its area with (t=0, row 1, col 1)
    small = {"boxes": torch.zeros(1, 4, 1, 4), "present": present}
    small["boxes"][0, 1, 0] = torch.tensor([0.3, 0.3, 0.1, 0.1])
    grid = torch.tensor([[2, 8, 8]])
    for min_overlap in (0.5, 1.0):
        targets = merged_token_targets(small, torch.ones(1, 1, 1), grid, 2, 2, min_overlap=min_overlap)
        assert targets[:, 0].nonzero().tolist() == [[5]]
    # straddling two cells, half of it in each: named in both at 0.5, in neither at 0.6
    small["boxes"][0, 1, 0] = torch.tensor([0.25, 0.3, 0.1, 0.1])
    assert merged_token_targets(small, torch.ones(1, 1, 1), grid, 2, 2, min_overlap=0.5)[:, 0].nonzero().tolist() == \
        [[4], [5]]
    assert merged_token_targets(small, torch.ones(1, 1, 1), grid, 2, 2, min_overlap=0.6)[:, 0].sum() == 0
    with pytest.raises(ValueError, match="share a patch grid"):
        merged_token_targets(batch, torch.ones(1, 1, 1), torch.tensor([[2, 8, 8], [2, 4, 4]]), 2, 2)
    with pytest.raises(ValueError, match="temporal patches"):
        merged_token_targets(batch, torch.ones(1, 1, 1), torch.tensor([[1, 8, 8]]), 2, 2)


def test_merged_token_targets_name_the_motion_where_the_object_is():
    # one object in the top-left merged cell of frames 0-1, moving down by a quarter cell; then gone
    boxes = torch.zeros(1, 4, 1, 4)
    boxes[0, 0, 0] = torch.tensor([0.125, 0.125, 0.25, 0.25])
    boxes[0, 1, 0] = torch.tensor([0.125, 0.1875, 0.25, 0.25])
    present = torch.tensor([[[True], [True], [False], [False]]])
    targets = merged_token_targets({"boxes": boxes, "present": present}, torch.ones(1, 1, 1),
                                   torch.tensor([[2, 8, 8]]), 2, 2, min_overlap=0.5)
    # the frame-1 box spans cells (0,0) and (1,0); its overlap with (1,0) is a quarter of the cell < 0.5
    expected = torch.zeros(32, 1 + len(MOTION_WORDS))
    expected[0, 0] = 1.0
    expected[0, 1 + MOTION_WORDS.index("down")] = 1.0
    assert torch.equal(targets, expected)
