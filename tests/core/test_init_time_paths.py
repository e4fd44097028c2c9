"""With a checkpoint, weight-only files are cleared from the config and architecture folders are read for
their config.json and tokenizer only."""
from __future__ import annotations

import core  # noqa: F401
from core.init_time_paths import drop_init_time_paths, is_init_time_key, strict_init_callback

import pytest
from jsonargparse import Namespace


def _config(**init_args):
    return Namespace(model=Namespace(class_path="x.Module", init_args=Namespace(**init_args)))


def test_grove_weight_files_are_cleared_and_the_llm_folder_kept_for_its_architecture():
    config = _config(global_encoder=Namespace(checkpoint="clip.bin", image_size=64),
                     grounding_encoder=Namespace(checkpoint="sam.pth"), decoder=Namespace(checkpoint="sam.pth"),
                     language_model=Namespace(path="vicuna", pretrained_weights=True), init_from_glamm="glamm")
    changed = drop_init_time_paths(config)
    args = config.model.init_args
    assert args.global_encoder.checkpoint is None and args.grounding_encoder.checkpoint is None
    assert args.decoder.checkpoint is None and args.init_from_glamm is None
    assert args.language_model.path == "vicuna" and args.language_model.pretrained_weights is False
    assert args.global_encoder.image_size == 64
    assert sorted(changed) == sorted(["model.init_from_glamm", "model.global_encoder.checkpoint",
                                      "model.grounding_encoder.checkpoint", "model.decoder.checkpoint",
                                      "model.language_model.pretrained_weights"])


def test_a_judge_checkpoint_of_trainable_weights_only_keeps_every_file():
    config = _config(vision_checkpoint="qwen_vision.bin", model_path="qwen", checkpoint_trainable_only=True)
    assert drop_init_time_paths(config) == []
    assert config.model.init_args.vision_checkpoint == "qwen_vision.bin"
    full = _config(vision_checkpoint="qwen_vision.bin", model_path="qwen", checkpoint_trainable_only=False)
    assert drop_init_time_paths(full) == ["model.vision_checkpoint", "model.pretrained_weights"]


def test_keys_and_callbacks():
    assert is_init_time_key("model.init_args.global_encoder.checkpoint")
    assert is_init_time_key("model.init_args.vision_checkpoint")
    assert not is_init_time_key("model.init_args.language_model.path")
    assert not is_init_time_key("model.init_args.language_model.checkpoint")
    init = {"class_path": "callbacks.init_from_checkpoint.InitFromCheckpoint", "init_args": {"checkpoint_path": "p"}}
    assert strict_init_callback(Namespace(trainer=Namespace(callbacks=[init])))
    loose = {**init, "init_args": {"checkpoint_path": "p", "strict": False}}
    assert not strict_init_callback(Namespace(trainer=Namespace(callbacks=[loose])))


def test_an_llm_folder_without_its_weights_builds_from_its_config(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    from models.grove.configuration import LanguageModelConfig
    from models.grove.language_model import GroveLanguageModel, load_tokenizer

    tokenizer = load_tokenizer(LanguageModelConfig())
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                 num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2)).save_pretrained(
        tmp_path / "llm")
    tokenizer.save_pretrained(tmp_path / "llm")
    for weights in (tmp_path / "llm").glob("*.safetensors"):
        weights.unlink()  # a machine that has the folder's small files only
    lm = GroveLanguageModel(LanguageModelConfig(path=str(tmp_path / "llm"), pretrained_weights=False))
    assert lm.hidden_size == 32 and lm.model.get_input_embeddings().num_embeddings == len(lm.tokenizer)
    with pytest.raises(OSError):
        GroveLanguageModel(LanguageModelConfig(path=str(tmp_path / "llm")))
