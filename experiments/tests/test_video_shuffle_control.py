"""experiments/video_shuffle_control.py: a video-blind model has no gap, a video-reading one has."""
import torch

from experiments.video_shuffle_control import main, shuffle_control
from tests.fixtures.tiny_cli import tiny_cli_args


def _args(root, tmp_path):
    args = tiny_cli_args(root, tmp_path)
    assert args[0] == "--config"
    return ["--config", args[1], "--split", "test", *args[2:]]


def test_gap_moves_with_random_video_tokens_and_is_zero_with_blind_ones(tiny_synthetic_root, tmp_path, capsys):
    result = main(_args(tiny_synthetic_root, tmp_path))
    assert result["batches"] == 1
    assert result["gap"] != 0.0  # random video tokens differ between clips: the loss moves
    assert "another clip's video" in capsys.readouterr().out

    from cli import cli_main

    cli = cli_main(_args(tiny_synthetic_root, tmp_path)[:2] + _args(tiny_synthetic_root, tmp_path)[4:], run=False)
    module, data = cli.model, cli.datamodule
    with torch.no_grad():  # VL's output layer to zero: every clip gets the same video tokens
        last = module.model.global_encoder.projector[-1]
        last.weight.zero_()
        last.bias.zero_()
    module.eval()
    data.prepare_data()
    data.setup("test")
    blind = shuffle_control(module, data.test_dataloader())
    assert blind["gap"] == 0.0 and blind["true"] == blind["shuffled"] > 0
