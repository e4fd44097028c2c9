"""The multi-node strategy overlays parse through the project's CLI and build their strategy objects.

The Trainer itself needs GPUs for DeepSpeed and FSDP, so the tests stop the CLI right before
building it and check the strategy object the CLI's parser instantiated from the overlay.
"""
import importlib.util

import pytest

import command_line.grove_cli as cli_module
from cli import cli_main
from tests.fixtures.paths import ROOT

STRATEGIES = ROOT / "configs" / "strategy"


def _parse_with_overlay(monkeypatch, overlay: str):
    monkeypatch.setattr(cli_module.GroveCLI, "instantiate_trainer", lambda self, **kwargs: None)
    cli = cli_main(["--config", str(ROOT / "configs" / "demo.yaml"), "--config", str(STRATEGIES / overlay),
                    "--model.init_args.global_encoder.checkpoint=null",
                    "--model.init_args.grounding_encoder.checkpoint=null"], run=False)
    return cli, cli.config_init["trainer"]


def _common_checks(cli, trainer):
    assert trainer["precision"] == "bf16-mixed"
    assert trainer["accelerator"] == "gpu"
    assert cli.config["data"]["init_args"]["batch_size"] == 1  # micro-batch 1, as the paper
    # the model config underneath is untouched by the overlay
    assert cli.config["model"]["init_args"]["train_llm"] is True


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                    reason="deepspeed is not installed (pip install deepspeed==0.19.8; DS_BUILD_OPS=0 on CPU)")
def test_deepspeed_zero2_overlay(monkeypatch):
    from lightning.pytorch.strategies import DeepSpeedStrategy

    cli, trainer = _parse_with_overlay(monkeypatch, "deepspeed_zero2.yaml")
    _common_checks(cli, trainer)
    strategy = trainer["strategy"]
    assert isinstance(strategy, DeepSpeedStrategy)
    zero = strategy.config["zero_optimization"]
    assert zero["stage"] == 2 and zero["contiguous_gradients"] and zero["overlap_comm"]
    assert strategy.config["train_micro_batch_size_per_gpu"] == 1


def test_fsdp_overlay(monkeypatch):
    from lightning.pytorch.strategies import FSDPStrategy
    from open_clip.transformer import ResidualAttentionBlock
    from segment_anything.modeling.image_encoder import Block
    from torch.distributed.fsdp import ShardingStrategy
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    from models.grove.adapters import SpatioTemporalAdapter

    cli, trainer = _parse_with_overlay(monkeypatch, "fsdp.yaml")
    _common_checks(cli, trainer)
    strategy = trainer["strategy"]
    assert isinstance(strategy, FSDPStrategy)
    assert strategy.sharding_strategy == ShardingStrategy.FULL_SHARD
    assert strategy.kwargs["use_orig_params"]  # frozen and trainable parameters share wrapped units
    policy = strategy.kwargs["auto_wrap_policy"]
    wrapped = set(policy._module_classes)
    assert wrapped == {LlamaDecoderLayer, ResidualAttentionBlock, Block, SpatioTemporalAdapter}
    # the policy wraps exactly the blocks of the demo model that the overlay names
    model = cli.model.model
    kinds = {type(m) for m in model.modules() if type(m) in wrapped}
    assert kinds == wrapped


def test_fsdp_activation_checkpointing_option(monkeypatch):
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    monkeypatch.setattr(cli_module.GroveCLI, "instantiate_trainer", lambda self, **kwargs: None)
    cli = cli_main(["--config", str(ROOT / "configs" / "demo.yaml"), "--config", str(STRATEGIES / "fsdp.yaml"),
                    "--model.init_args.global_encoder.checkpoint=null",
                    "--model.init_args.grounding_encoder.checkpoint=null",
                    "--trainer.strategy.init_args.activation_checkpointing_policy="
                    "[transformers.models.llama.modeling_llama.LlamaDecoderLayer]"], run=False)
    strategy = cli.config_init["trainer"]["strategy"]
    policy = strategy._activation_checkpointing_kwargs["auto_wrap_policy"]
    assert set(policy._module_classes) == {LlamaDecoderLayer}
