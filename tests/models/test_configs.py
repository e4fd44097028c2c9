"""models.grove.configuration reads stacked configs the way the command line does: for every stack of the
project's configs, the four part configs it builds equal the ones the command line's parser
(:class:`core.config_loader.ConfigLoader`, jsonargparse over GroveModule's signature) gives."""
import core  # noqa: F401
from core.config_loader import ConfigLoader

from dataclasses import asdict

import pytest

from models.grove.configuration import PART_CONFIGS, model_configs_from_yaml
from tests.fixtures.paths import ROOT

CONFIGS = ROOT / "configs"
STACKS = [
    ["demo.yaml"],
    ["pretrain.yaml"],
    ["pretrain.yaml", "ablations/no_adapters.yaml"],
    ["pretrain.yaml", "ablations/frozen_decoder_vl_lq.yaml"],
    ["pretrain.yaml", "finetune_iground.yaml"],
    ["pretrain.yaml", "overlays/pretrain_raw_towers.yaml"],
    ["official/grove.yaml"],
    ["official/grove.yaml", "official/finetune.yaml"],
    ["official/tiny.yaml"],
]


class _Parsed(Exception):
    pass


class _ParseOnly(ConfigLoader):
    def before_instantiate_classes(self) -> None:
        raise _Parsed(self.config)


def _cli_parts(paths) -> dict:
    args = [a for p in paths for a in ("--config", str(p))]
    with pytest.raises(_Parsed) as parsed:
        _ParseOnly(subclass_mode_model=True, subclass_mode_data=True, parser_kwargs={"parser_mode": "omegaconf"},
                   args=args, run=False, save_config_callback=None)
    init_args = parsed.value.args[0].model.init_args
    return {name: init_args[name] for name in PART_CONFIGS}


def _plain(value):
    if hasattr(value, "as_dict"):
        value = value.as_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@pytest.mark.parametrize("stack", STACKS, ids=["+".join(s) for s in STACKS])
def test_stacked_part_configs_equal_the_command_lines(stack):
    paths = [CONFIGS / name for name in stack]
    ours = model_configs_from_yaml(paths)
    theirs = _cli_parts(paths)
    for name in PART_CONFIGS:
        assert _plain(asdict(ours[name])) == _plain(theirs[name]), f"{'+'.join(stack)}: model.init_args.{name}"
