"""The VC-Inspector judge as an exported folder (:mod:`core.weights.pretrained_folder`), for
:meth:`judge.model.vc_inspector.VCInspectorJudge.save_pretrained` / ``from_pretrained``.

config.json holds the Qwen2.5-VL configuration (``qwen_config``), the judge's own settings
(``judge``: LoRA shape, prompt template, frame size bounds, error head), ``scoring`` (frames per
clip, answer budget), ``module`` (the JudgeModule and its init arguments, for ``cli.py --ckpt_path
DIR``; ``architecture_folder: "."`` is the folder itself) and ``card``; the tokenizer and the
video processor's files sit next to it, as in a Qwen2.5-VL folder.
"""
from __future__ import annotations

from core.weights.pretrained_folder import CONFIG_FILE, load_into, load_weights, read_config, save_weights, write_json

from pathlib import Path

MODEL_TYPE = "vc_inspector"
FORMAT_VERSION = 1
SETTINGS = ("scoring", "module", "card")


def build_base_from_folder(folder: str | Path, dtype):
    """Tokenizer, video processor and a Qwen2.5-VL of the folder's architecture (weights not loaded)."""
    from transformers import AutoTokenizer, AutoVideoProcessor, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    folder = Path(folder)
    config = read_config(folder, MODEL_TYPE)
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the auto loaders read config.json and warn about model_type 'vc_inspector'
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        video_processor = AutoVideoProcessor.from_pretrained(str(folder))
    finally:
        hf_logging.set_verbosity(verbosity)
    qwen = Qwen2_5_VLConfig.from_dict(config["qwen_config"])
    base = Qwen2_5_VLForConditionalGeneration._from_config(qwen, dtype=dtype)
    return tokenizer, video_processor, base


def judge_config(judge) -> dict:
    """config.json of ``judge`` (see the module docstring)."""
    settings = dict(judge.init_settings)
    if judge.has_adapter:  # the adapter's shape, also when it was loaded from an adapter folder
        peft = judge.model.peft_config["default"]
        settings["lora"] = {"r": int(peft.r), "alpha": int(peft.lora_alpha), "dropout": float(peft.lora_dropout)}
    else:
        settings["lora"] = None
    settings["error_head"] = judge.error_head is not None
    qwen = judge.base_model.config.to_dict()
    for key in ("transformers_version", "_name_or_path", "dtype", "torch_dtype"):
        qwen.pop(key, None)
    return {"model_type": MODEL_TYPE, "architectures": ["VCInspectorJudge"], "format_version": FORMAT_VERSION,
            "qwen_config": qwen, "judge": settings, **{k: judge.settings[k] for k in SETTINGS if k in judge.settings}}


def model_card(config: dict) -> str:
    card = config.get("card") or {}
    text = config["qwen_config"].get("text_config") or {}
    lines = ["---", "library_name: grove", "tags:", "- video-caption-evaluation", "- pytorch_model_hub_mixin", "---",
             "", f"# {card.get('name') or 'VC-Inspector judge'}", "",
             "A reference-free video caption judge (Qwen2.5-VL architecture): rates a (video, caption) pair 1-5 and "
             "explains why. Exported by this project's `grove export`.", "",
             f"- language model: {text.get('num_hidden_layers')} layers, hidden size {text.get('hidden_size')}; "
             f"judge settings: {config.get('judge')}", "", "## Training data", "",
             card.get("training_data") or "Not recorded.", "", "## Test metrics", ""]
    metrics = card.get("test_metrics") or {}
    if metrics:
        lines += ["| metric | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in sorted(metrics.items())]
    else:
        lines.append("Not known for this export.")
    lines += ["", "## Use", "", "`grove judge score --judge FOLDER --pairs PAIRS.jsonl --out SCORES.jsonl`, or",
              "", "```python", "from judge.model.vc_inspector import VCInspectorJudge", "",
              "judge = VCInspectorJudge.from_pretrained(FOLDER_OR_REPO_ID)", "```", ""]
    return "\n".join(lines)


def save_judge(judge, folder: str | Path, max_shard_bytes: int | None = None) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = judge_config(judge)
    max_shard_bytes = max_shard_bytes or getattr(judge, "max_shard_bytes", None)
    save_weights(judge.state_dict(), folder, **({"max_shard_bytes": max_shard_bytes} if max_shard_bytes else {}))
    judge.prompter.tokenizer.save_pretrained(str(folder))
    judge.prompter.video_processor.save_pretrained(str(folder))
    write_json(folder / CONFIG_FILE, config)
    (folder / "README.md").write_text(model_card(config), encoding="utf-8")


def load_judge_folder(cls, folder: str | Path, map_location: str = "cpu"):
    """A judge rebuilt from an exported folder and loaded with its weights, in eval mode."""
    folder = Path(folder)
    config = read_config(folder, MODEL_TYPE)
    settings = dict(config.get("judge") or {})
    if "qwen_config" not in config:
        raise ValueError(f"{folder / CONFIG_FILE}: lacks qwen_config")
    judge = cls(architecture_folder=str(folder), **settings)
    load_into(judge, load_weights(folder), str(folder))
    judge.settings = {k: config[k] for k in SETTINGS if k in config}
    return judge.to(map_location).eval()


def judge_settings(module, data_hparams: dict | None = None, card: dict | None = None) -> dict:
    """``scoring``, ``module`` and ``card`` entries for a trained JudgeModule's config.json."""
    import json

    def jsonable(value) -> bool:
        try:
            json.dumps(value)
        except TypeError:
            return False
        return True

    hp = dict(module.hparams)
    skip = {"model_path", "tiny", "adapter_path", "vision_checkpoint", "optimizer", "lr_scheduler", "adapter_dir",
            "pretrained_weights", "architecture_folder", "checkpoint_trainable_only", "lora"}
    init_args = {k: v for k, v in hp.items() if k not in skip and not k.startswith("_") and jsonable(v)}
    lora = judge_config(module.judge)["judge"]["lora"]
    init_args.update(architecture_folder=".", lora=lora, max_new_tokens=module.max_new_tokens)
    data = dict(data_hparams or {})
    return {"scoring": {"num_frames": int(data.get("num_frames", 32)), "max_new_tokens": module.max_new_tokens},
            "module": {"class_path": "judge.training.module.JudgeModule", "init_args": init_args,
                       "weights_prefix": "judge."},
            "card": dict(card or {})}
