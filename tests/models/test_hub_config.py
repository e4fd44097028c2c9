"""A hub folder of the official package (config.json, preprocessor_config.json, safetensors) is converted with
its own settings: the folder's threshold, ``rms_norm_eps`` and frames reach the converted model; a YAML that
sets them otherwise is an error naming both values and keys; an override lets the YAML win, with a warning."""
from __future__ import annotations

from core.weights import read_weights

import json
import re
from pathlib import Path

import pytest
import torch
import yaml

from models.grove.hub_config import HubConfigMismatch, hub_settings, is_hub_folder, reconcile
from tests.fixtures.official_grove_state import official_state_dict

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "official" / "tiny.yaml"
# the tiny official model's config.json as GroveConfig.save_pretrained writes it, with a threshold,
# an rms_norm_eps and a number of frames that differ from configs/official/tiny.yaml (0.5, 1e-5, 8)
HUB_CONFIG = {
    "architectures": ["GroveForCausalLM"], "model_type": "grove", "transformers_version": "4.46.3",
    "torch_dtype": "bfloat16", "vocab_size": 128, "hidden_size": 64, "intermediate_size": 172,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 1024,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "rope_scaling": None, "hidden_act": "silu",
    "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
    "mm_vision_tower": "tiny/clip", "mm_vision_select_layer": -2, "mm_vision_select_feature": "patch",
    "out_dim": 32, "use_temp_objectness": True, "temp_objectness_threshold": 0.3, "num_frames": 4,
    "ce_loss_weight": 1.0, "giou_loss_weight": 1.0, "temp_objectness_loss_weight": 1.0, "with_region": True,
    "train_mask_decoder": False, "special_tokens": {},
}
HUB_PREPROCESSOR = {"processor_class": "GroveProcessor", "vision_tower": "tiny/clip", "grounding_image_size": 64,
                    "num_frames": 4, "use_mm_start_end": True, "target_fps": 5, "conv_type": "llava_v1"}


def _convert_main(*argv: str) -> int:
    from command_line.convert_official_grove import main

    return main(list(argv))


def _hub_folder(path: Path, config: dict = HUB_CONFIG) -> Path:
    from safetensors.torch import save_file

    path.mkdir(parents=True)
    save_file({k: v.clone().contiguous() for k, v in official_state_dict("tiny").items()},
              str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(config))
    (path / "preprocessor_config.json").write_text(json.dumps(HUB_PREPROCESSOR))
    return path


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Path:
    return _hub_folder(tmp_path_factory.mktemp("hub") / "grove")


@pytest.fixture(scope="module")
def open_yaml(tmp_path_factory) -> Path:
    """configs/official/tiny.yaml without the three keys the folder sets otherwise."""
    config = yaml.safe_load(TINY.read_text())
    del config["model"]["init_args"]["objectness_threshold"]
    del config["model"]["init_args"]["language_model"]["llama_config"]["rms_norm_eps"]
    del config["data"]["init_args"]["num_frames"]
    path = tmp_path_factory.mktemp("yaml") / "tiny_open.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_folder_is_recognised_and_read(hub):
    assert is_hub_folder(hub) and not is_hub_folder(hub / "model.safetensors")
    settings, notes = hub_settings(hub)
    by_key = {(s.file, s.key): s for s in settings}
    assert by_key[("config.json", "temp_objectness_threshold")].target == "model.init_args.objectness_threshold"
    assert by_key[("config.json", "rms_norm_eps")].value == 1e-6
    assert by_key[("preprocessor_config.json", "num_frames")].target == "data.init_args.num_frames"
    assert any("'tiny/clip' is not a tower" in n for n in notes)
    assert any("ce_loss_weight" in n and "with_region" in n for n in notes)


def test_a_key_the_file_lacks_is_the_package_default(tmp_path):
    config = {k: v for k, v in HUB_CONFIG.items() if k not in ("rms_norm_eps", "num_key_value_heads",
                                                              "temp_objectness_threshold")}
    (tmp_path / "config.json").write_text(json.dumps(config))
    settings = {s.key: s for s in hub_settings(tmp_path)[0]}
    assert settings["rms_norm_eps"].value == 1e-6 and settings["rms_norm_eps"].defaulted  # LlamaConfig's default
    assert settings["temp_objectness_threshold"].value == 0.5  # GroveConfig's default
    assert settings["num_key_value_heads"].value == 4  # None: as many as the attention heads


def test_reconcile_fills_unset_keys_and_names_both_sides_of_a_disagreement(hub):
    settings, _ = hub_settings(hub)
    merged = {"model": {"init_args": {"objectness_threshold": 0.5, "language_model": {"llama_config": {}}}},
              "data": {"init_args": {"num_frames": 4}}}
    with pytest.raises(HubConfigMismatch) as err:
        reconcile(merged, settings, hub, "my.yaml")
    text = str(err.value)
    assert (f"{hub / 'config.json'} has temp_objectness_threshold = 0.3, but my.yaml sets "
            "model.init_args.objectness_threshold = 0.5") in text
    assert "num_frames" not in text  # the YAML agrees
    layer, warnings = reconcile(merged, settings, hub, "my.yaml", override=["temp_objectness_threshold"])
    assert "objectness_threshold" not in layer["model"]["init_args"]  # the YAML wins ...
    assert len(warnings) == 1 and "0.3" in warnings[0] and "0.5" in warnings[0]  # ... said so
    assert layer["model"]["init_args"]["language_model"]["llama_config"]["rms_norm_eps"] == 1e-6  # unset: folder's


def test_the_converted_model_uses_the_folder_s_settings(hub, open_yaml, tmp_path, capsys):
    from lightning_modules.grove_module import GroveModule  # noqa: F401  (the module class the folder names)
    from models.grove import Grove
    from models.grove.processing import GroveProcessor

    assert _convert_main(str(hub), "--config", str(open_yaml), "--check") == 0
    out = capsys.readouterr().out
    assert "model.init_args.objectness_threshold = 0.3" in out and "data.init_args.num_frames = 4" in out
    folder = tmp_path / "exported"
    assert _convert_main(str(hub), "--config", str(open_yaml), "--export", str(folder)) == 0
    loaded = Grove.from_pretrained(folder)
    assert loaded.language_model.model.config.rms_norm_eps == 1e-6
    assert loaded.settings["inference"]["objectness_threshold"] == 0.3
    assert loaded.settings["preprocessing"]["num_frames"] == 4
    processor = GroveProcessor.from_pretrained(folder)
    assert processor.inference["objectness_threshold"] == 0.3 and processor.preprocessing["num_frames"] == 4
    assert processor.inference["text_protocol"] == "package"  # the package's API gives the package's outputs
    state = read_weights(folder)
    released = official_state_dict("tiny")["model.text_hidden_fcs.0.0.weight"]
    assert torch.equal(state["query_projector.0.weight"], released)
    # a Lightning checkpoint carries the folder's model settings as hyper-parameters for cli.py --ckpt_path
    assert _convert_main(str(hub), "--config", str(open_yaml), "--out", str(tmp_path / "grove.ckpt")) == 0
    saved = torch.load(tmp_path / "grove.ckpt", map_location="cpu", weights_only=True)["hyper_parameters"]
    assert saved["objectness_threshold"] == 0.3 and saved["language_model"]["llama_config"]["rms_norm_eps"] == 1e-6
    assert "--data.init_args.num_frames=4" in capsys.readouterr().out


def test_a_disagreeing_yaml_is_an_error_naming_both(hub, tmp_path, capsys):
    assert _convert_main(str(hub), "--config", str(TINY), "--out", str(tmp_path / "grove.ckpt")) == 1
    err = capsys.readouterr().err
    assert f"{hub / 'config.json'} has temp_objectness_threshold = 0.3, but {TINY} sets " \
           "model.init_args.objectness_threshold = 0.5" in err
    assert "rms_norm_eps = 1e-06" in err and "model.init_args.language_model.llama_config.rms_norm_eps = 1e-05" in err
    assert f"{hub / 'preprocessor_config.json'} has num_frames = 4" in err and "data.init_args.num_frames = 8" in err
    assert not (tmp_path / "grove.ckpt").exists()
    # overriding one key leaves the others refused
    assert _convert_main(str(hub), "--config", str(TINY), "--check", "--override-hub-config",
                         "model.init_args.objectness_threshold") == 1
    err = capsys.readouterr().err
    assert "temp_objectness_threshold" not in err and "rms_norm_eps" in err


def test_an_override_lets_the_yaml_win_with_a_warning(hub, tmp_path, capsys):
    from lightning_modules.grove_module import GroveModule  # noqa: F401
    from models.grove import Grove

    folder = tmp_path / "exported"
    assert _convert_main(str(hub), "--config", str(TINY), "--export", str(folder), "--override-hub-config") == 0
    out = capsys.readouterr().out
    assert "overridden:" in out and "temp_objectness_threshold = 0.3" in out and "objectness_threshold = 0.5" in out
    loaded = Grove.from_pretrained(folder)
    assert loaded.language_model.model.config.rms_norm_eps == 1e-5
    assert loaded.settings["inference"]["objectness_threshold"] == 0.5
    assert loaded.settings["preprocessing"]["num_frames"] == 8


def test_loading_the_hub_folder_directly_says_to_convert_it(hub):
    from models.grove import Grove

    with pytest.raises(ValueError, match="official inference package.*grove convert-grove"):
        Grove.from_pretrained(hub)


def test_two_files_of_the_folder_that_disagree_are_named(tmp_path):
    folder = tmp_path / "hub"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**HUB_CONFIG, "num_frames": 1}))
    (folder / "preprocessor_config.json").write_text(json.dumps(HUB_PREPROCESSOR))
    settings, _ = hub_settings(folder)
    with pytest.raises(HubConfigMismatch, match=r"config.json has num_frames = 1, but .*preprocessor_config.json has "
                                                r"num_frames = 4 \(both are data.init_args.num_frames\)"):
        reconcile({"data": {"init_args": {}}}, settings, folder, "my.yaml")
    # the YAML decides, when told to win
    layer, warnings = reconcile({"data": {"init_args": {"num_frames": 4}}}, settings, folder, "my.yaml",
                                override=["num_frames"])
    assert "num_frames" not in layer.get("data", {}).get("init_args", {}) and len(warnings) == 1


def test_cli_given_a_hub_folder_names_the_converter(hub):
    """``cli.py --ckpt_path HUB_DIR`` cannot rebuild a LightningModule from the package's folder: the error
    says so and gives the conversion command with that folder."""
    from core.init_time_paths import exported_module

    with pytest.raises(ValueError, match="hub folder of the official GROVE package") as err:
        exported_module(hub)
    assert f"grove convert-grove {hub} " in str(err.value) and "--export" in str(err.value)


def test_every_config_value_of_the_wrong_type_or_range_is_refused_naming_it(tmp_path):
    from core.user_errors import UserInputError

    import random

    from models.grove.hub_config import HUB_TYPES

    rng = random.Random(4)
    wrong = ["0.3", None, True, -1, 0, 1.5, float("nan"), [1], {"a": 1}, ""]
    (tmp_path / "config.json").write_text(json.dumps(HUB_CONFIG))
    assert hub_settings(tmp_path)[0]  # the good config passes
    for key in sorted(k for k in HUB_TYPES if k in HUB_CONFIG):
        what, ok = HUB_TYPES[key]
        bad = [v for v in wrong if not ok(v)]
        value = rng.choice(bad)
        (tmp_path / "config.json").write_text(json.dumps({**HUB_CONFIG, key: value}))
        with pytest.raises(UserInputError, match=rf"config.json: {key} must be {re.escape(what)}"):
            hub_settings(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**HUB_CONFIG, "temp_objectness_threshold": "0.3"}))
    with pytest.raises(UserInputError, match="temp_objectness_threshold must be a number in"):
        hub_settings(tmp_path)


def test_a_folder_of_another_model_type_is_refused_naming_it(tmp_path):
    from core.user_errors import UserInputError

    (tmp_path / "config.json").write_text(json.dumps({**HUB_CONFIG, "model_type": "llava"}))
    with pytest.raises(UserInputError, match='model_type is "llava", not \'grove\''):
        hub_settings(tmp_path)
