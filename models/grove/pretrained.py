"""GROVE as an exported folder (:mod:`core.weights.pretrained_folder`): what its config.json holds and how it
is read back, for :meth:`models.grove.Grove.save_pretrained` / :meth:`~models.grove.Grove.from_pretrained`.

config.json holds the four part configurations with every init-time path cleared (the weights
are in the folder) and the LLM's full LLaMA configuration in ``language_model.llama_config``
(so neither the LLM folder nor the training YAML is needed), plus :data:`SETTINGS`:

* ``prompt``: the chat template, question policy and target text the model was trained with;
* ``inference``: objectness threshold, windows, text protocol, caption budget;
* ``preprocessing`` (also written as preprocessor_config.json): frames per window, image sizes
  and resize modes, the clip length predictions are cut into;
* ``module``: the LightningModule class and its init arguments, so that ``cli.py --ckpt_path DIR``
  rebuilds it (paths in it are relative to the folder: ``"."`` is the folder itself);
* ``card``: what the model card says about training data and test metrics.
"""
from __future__ import annotations

from core.user_errors import UserInputError
from core.weights.pretrained_folder import (
    CONFIG_FILE,
    PREPROCESSOR_FILE,
    PretrainedFolderError,
    load_into,
    load_weights,
    read_config,
    resolve_folder,
    save_weights,
    write_json,
)

from dataclasses import asdict
from pathlib import Path

MODEL_TYPE = "grove"
FORMAT_VERSION = 1
SETTINGS = ("prompt", "inference", "preprocessing", "module", "card")
# LLaMA config entries that describe the run or the file rather than the architecture
_RUN_KEYS = ("architectures", "transformers_version", "model_type", "dtype", "torch_dtype", "_name_or_path",
             "auto_map", "use_cache", "output_attentions", "output_hidden_states", "return_dict")
_HUB_KWARGS = ("revision", "cache_dir", "force_download", "local_files_only", "token")


def part_configs_of(model) -> dict:
    """The four part configurations of a built GROVE as plain dicts, ready for config.json."""
    parts = {"global_encoder": asdict(model.global_encoder.config),
             "grounding_encoder": asdict(model.grounding_encoder.config),
             "language_model": asdict(model.language_model.config),
             "decoder": asdict(model.box_decoder.config)}
    for name in ("global_encoder", "grounding_encoder", "decoder"):
        parts[name]["checkpoint"] = None
    for part in parts.values():
        if "gradient_checkpointing" in part:
            part["gradient_checkpointing"] = False
    llm = model.language_model.model.config
    if llm.model_type != "llama":
        raise ValueError(f"exporting GROVE needs a LLaMA-family LLM (its config is saved as llama_config); this "
                         f"one is {llm.model_type!r}")
    llama = {k: v for k, v in llm.to_diff_dict().items() if k not in _RUN_KEYS and not k.startswith("_")}
    parts["language_model"].update(path=None, tokenizer_path=None, llama_config=llama, pretrained_weights=True)
    return parts


def grove_config(model) -> dict:
    """config.json of ``model`` (see the module docstring)."""
    return {"model_type": MODEL_TYPE, "architectures": ["Grove"], "format_version": FORMAT_VERSION,
            **part_configs_of(model), **{k: model.settings[k] for k in SETTINGS if k in model.settings}}


def model_card(config: dict) -> str:
    """README.md of an exported folder: what the model is, how to run it, its data and test metrics."""
    card = config.get("card") or {}
    lm = config["language_model"]["llama_config"]
    lines = ["---", "library_name: grove", "tags:", "- grounded-video-captioning", "- pytorch_model_hub_mixin", "---",
             "", f"# {card.get('name') or 'GROVE'}", "",
             "GROVE: grounded video caption generation (a caption whose noun phrases are boxed on every frame), "
             "exported by this project's `grove export`.", "",
             f"- LLM: LLaMA, {lm.get('num_hidden_layers')} layers, hidden size {lm.get('hidden_size')}, "
             f"vocabulary {lm.get('vocab_size')}",
             f"- windows of {(config.get('preprocessing') or {}).get('num_frames', '?')} frames; "
             f"inference settings: {config.get('inference') or {}}", "",
             "## Training data", "", card.get("training_data") or "Not recorded.", "",
             "## Test metrics", ""]
    metrics = card.get("test_metrics") or {}
    if metrics:
        lines += ["| metric | value |", "|---|---|"]
        lines += [f"| {k} | {v:.4f} |" if isinstance(v, float) else f"| {k} | {v} |"
                  for k, v in sorted(metrics.items())]
        if card.get("metrics_source"):
            lines += ["", f"From {card['metrics_source']}."]
    else:
        lines.append("Not known for this export.")
    lines += ["", "## Use", "", "```python", "from models.grove import Grove",
              "from models.grove.processing import GroveProcessor", "",
              "model = Grove.from_pretrained(FOLDER_OR_REPO_ID)",
              "processor = GroveProcessor.from_pretrained(FOLDER_OR_REPO_ID)",
              "out = processor.generate(model, 'video.mp4', token_embeddings=None, device='cpu')", "```", "",
              "or `python cli.py predict --config CONFIG --ckpt_path FOLDER --data.init_args.videos=VIDEO`.", ""]
    return "\n".join(lines)


def save_grove(model, folder: str | Path, max_shard_bytes: int | None = None) -> None:
    """Write ``model`` as an exported folder (weights, tokenizer, config.json, preprocessing, model card)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = grove_config(model)
    max_shard_bytes = max_shard_bytes or getattr(model, "max_shard_bytes", None)
    save_weights(model.state_dict(), folder, **({"max_shard_bytes": max_shard_bytes} if max_shard_bytes else {}))
    model.tokenizer.save_pretrained(str(folder))
    write_json(folder / CONFIG_FILE, config)
    if config.get("preprocessing"):
        write_json(folder / PREPROCESSOR_FILE, {"processor_class": "GroveProcessor", **config["preprocessing"]})
    (folder / "README.md").write_text(model_card(config), encoding="utf-8")


def resolve_grove_folder(name_or_path, hub_kwargs: dict) -> Path:
    return resolve_folder(name_or_path, **{k: hub_kwargs[k] for k in _HUB_KWARGS if k in hub_kwargs})


def model_dtype(dtype=None, torch_dtype=None):
    """The dtype ``from_pretrained`` builds in: ``dtype`` or ``torch_dtype`` (both accepted, as by
    transformers), a ``torch.dtype`` or its name (``"bfloat16"``, ``"torch.float16"``); None = fp32."""
    import torch

    def resolve(value):
        if value is None or value == "auto":
            return None
        chosen = getattr(torch, value.removeprefix("torch."), None) if isinstance(value, str) else value
        if chosen not in (torch.float32, torch.bfloat16, torch.float16):
            raise ValueError(f"from_pretrained: dtype must be torch.float32, torch.bfloat16 or torch.float16 (or its "
                             f"name), got {value!r}")
        return chosen

    chosen, other = resolve(dtype), resolve(torch_dtype)
    if chosen is not None and other is not None and chosen != other:
        raise ValueError(f"from_pretrained: dtype={dtype!r} and torch_dtype={torch_dtype!r} disagree; give one")
    return chosen if chosen is not None else other


def load_grove(cls, folder: str | Path, map_location: str = "cpu", dtype=None):
    """A GROVE rebuilt from an exported folder's config.json and loaded with its weights, in eval mode.

    With ``dtype`` (bf16 or fp16) the model is built in that dtype (no fp32 copy is ever made) and
    the weights are cast to it as they load, except the fp32 buffers of :mod:`models.grove.fp32_buffers`."""
    from models.grove.configuration import part_configs
    from models.grove.hub_config import is_hub_folder

    folder = Path(folder)
    if is_hub_folder(folder):
        raise UserInputError(f"{folder}: a folder of the official inference package (GroveForCausalLM), not an "
                             f"export of this project; convert it once: grove convert-grove {folder} "
                             "--config configs/official/grove.yaml --export OUT (its config.json is honoured), "
                             "then load OUT")
    config = read_config(folder, MODEL_TYPE)
    source = str(folder / CONFIG_FILE)
    missing = [k for k in ("global_encoder", "grounding_encoder", "language_model", "decoder") if k not in config]
    if missing:
        raise ValueError(f"{source}: lacks {missing}")
    check_sizes(config, source)
    parts = part_configs(config, source)
    parts["language_model"].tokenizer_path = str(folder)
    parts["language_model"].path = None
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the tokenizer loader reads config.json and warns about model_type 'grove'
    import torch

    default_dtype = torch.get_default_dtype()
    if dtype is not None:
        torch.set_default_dtype(dtype)  # parameters are created in ``dtype``
    try:
        model = cls(**parts)
    except (ValueError, AssertionError, TypeError) as err:  # part configs that contradict one another
        raise PretrainedFolderError(f"{source}: its sizes do not build a GROVE: {err}") from None
    finally:
        hf_logging.set_verbosity(verbosity)
        torch.set_default_dtype(default_dtype)
    if dtype is not None:
        model.to(dtype)  # what was created in an explicit fp32 (fp32 buffers stay fp32)
    load_into(model, load_weights(folder), str(folder))
    model.settings = {k: config[k] for k in SETTINGS if k in config}
    prompt = config.get("prompt") or {}
    model.prompter = model.make_prompter(sample_question=bool(prompt.get("sample_question", False)),
                                         template=prompt.get("chat_template", "vicuna_v1"),
                                         target_text=prompt.get("target_text", "as_is"))
    return model.to(map_location).eval()


# (part, sub-config, size, count): attention splits ``size`` into ``count`` heads (Vaswani et al.,
# "Attention Is All You Need"), and grouped-query attention shares key/value heads among query heads
# (Ainslie et al., "GQA").
_DIVISIBLE = (("decoder", None, "dim", "num_heads"),
              ("grounding_encoder", "encoder_config", "embed_dim", "num_heads"),
              ("language_model", "llama_config", "hidden_size", "num_attention_heads"),
              ("language_model", "llama_config", "num_attention_heads", "num_key_value_heads"),
              ("global_encoder", "vision_config", "width", "head_width"))


def check_sizes(config: dict, source: str) -> None:
    """A :class:`PretrainedFolderError` naming ``source`` and the keys when a size of config.json does not
    split into its heads."""
    for part, sub, size_key, count_key in _DIVISIBLE:
        values = config.get(part)
        if sub is not None:
            values = values.get(sub) if isinstance(values, dict) else None
        if not isinstance(values, dict):
            continue
        size, count = values.get(size_key), values.get(count_key)
        if not (isinstance(size, int) and isinstance(count, int)):
            continue
        where = ".".join(k for k in (part, sub) if k)
        if count <= 0 or size % count:
            raise PretrainedFolderError(f"{source}: {where}.{size_key} = {size} is not divisible by "
                                        f"{where}.{count_key} = {count}; fix config.json or export the model again")


def pop_quantization(kwargs: dict) -> str | None:
    """The ``quantization`` keyword of ``Grove.from_pretrained``, taken out of ``kwargs`` and checked
    before anything loads (:data:`models.grove.quantization.SCHEMES`, or ``None``)."""
    quantization = kwargs.pop("quantization", None)
    if quantization is not None:
        from models.grove.quantization import check_scheme

        check_scheme(quantization, "Grove.from_pretrained(quantization=...)")
    return quantization


def quantize_loaded(model, quantization: str | None):
    """``model`` with its weights quantised per ``quantization`` (``None``: as it is), after loading and any
    dtype cast (:func:`models.grove.quantization.quantize_weights`)."""
    if quantization is not None:
        from models.grove.quantization import quantize_weights

        quantize_weights(model, quantization)
    return model
