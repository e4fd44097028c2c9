"""InitFromCheckpoint starts fine-tuning from an exported folder's weights as from a checkpoint file."""
import core  # noqa: F401

import torch

from callbacks.init_from_checkpoint import InitFromCheckpoint
from lightning_modules.grove_module import GroveModule
from models.grove.configuration import tiny_configs
from models.grove.export import grove_settings


def test_an_exported_folder_initialises_every_weight(tmp_path):
    torch.manual_seed(0)
    trained = GroveModule(**tiny_configs(), chat_template="plain")
    trained.model.settings = grove_settings(trained)
    trained.model.save_pretrained(tmp_path / "exported")
    torch.manual_seed(1)
    fresh = GroveModule(**tiny_configs(), chat_template="plain")
    before = {k: v.clone() for k, v in fresh.model.state_dict().items()}
    InitFromCheckpoint(str(tmp_path / "exported")).setup(None, fresh, "fit")
    expected, loaded = trained.model.state_dict(), fresh.model.state_dict()
    assert any(not torch.equal(before[k], expected[k]) for k in expected)
    assert all(torch.equal(loaded[k], expected[k]) for k in expected)
