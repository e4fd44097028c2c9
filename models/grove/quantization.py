"""Weight-only 8-bit GROVE for inference: the big frozen backbones' linear layers hold int8 weights.

``int8`` (torchao's ``Int8WeightOnlyConfig``): each output row of a linear weight is stored as int8
values with one float32 scale (and an int8 zero point, 0 for this symmetric scheme); activations and
every other tensor keep their dtype, and the matrix product dequantises on the fly. It runs on CPU
and GPU alike. A linear of shape (N, K) then holds ``N*K + 5*N`` bytes instead of ``N*K*4`` (fp32) or
``N*K*2`` (bf16, fp16).

What is quantised, and why (:func:`quantizable_linears`): the ``nn.Linear`` layers of the three
pre-trained backbones, i.e. the LLM's decoder blocks (``llm_blocks``), the CLIP ViT's blocks
(``global_backbone``) and SAM's image encoder (``grounding_backbone``). They hold 90 % of the
released model's 8.1 B parameters, the paper keeps them frozen, and their wide matrices (K = 1024 to
11008 values per row) share one scale per row with little loss. What stays as it is:

* the LLM's input embeddings and output layer (``lm_head``): the embeddings are a lookup, not a
  matrix product, and both hold the trained rows of the added tokens (``<p>``, ``</p>``, ``[DET]``)
  whose logits decide the caption; together 3.2 % of the released parameters;
* everything the fine-tuning trains: the adapters, the vision projector (VL), the query projector
  (LQ), the box decoder and the box and objectness heads (5.5 % of the released parameters, most
  of it the adapters). The heads and decoder produce the boxes and objectness directly, and the
  adapters' outputs are added to the frozen towers' features: their rounding would reach the
  outputs without a large block between to absorb it;
* the attention projections of CLIP's ``nn.MultiheadAttention`` (its packed input projection is a
  bare parameter, and its ``out_proj`` weight is read by ``F.multi_head_attention_forward``
  directly, which the int8 tensor does not support; 1.2 % of the released parameters);
* norms, biases, positional embeddings and LoRA factors (vectors or small).

Quantised models are for inference (predict, test, validate); they are not trained.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

SCHEMES = ("int8",)
# Parameter groups (models.grove.modeling.PARAMETER_GROUPS) whose nn.Linear layers are quantised.
QUANTIZED_GROUPS = ("global_backbone", "grounding_backbone", "llm_blocks")
# per output row: one float32 scale and one int8 zero point
INT8_ROW_OVERHEAD_BYTES = 5


@dataclass(frozen=True)
class QuantizationReport:
    """What :func:`quantize_weights` did: the scheme, the quantised layers and the weight bytes
    (parameters and buffers) of the whole model before and after."""

    scheme: str
    layers: tuple[str, ...]
    bytes_before: int
    bytes_after: int

    def __str__(self) -> str:
        return (f"{self.scheme} weights: {len(self.layers)} linear layers quantised; weights "
                f"{self.bytes_before / 2 ** 20:.1f} MiB -> {self.bytes_after / 2 ** 20:.1f} MiB")


def check_scheme(scheme: str, where: str = "quantization") -> str:
    """``scheme`` if known; otherwise a :class:`core.user_errors.UserInputError` naming ``where``
    and the known schemes."""
    if scheme not in SCHEMES:
        from core.user_errors import UserInputError

        raise UserInputError(f"{where}: unknown weight quantization scheme {scheme!r}; choose one of {SCHEMES} "
                         "(or null for none)")
    return scheme


def is_int8(weight: torch.Tensor) -> bool:
    """Whether ``weight`` is torchao's int8 weight tensor (checked by name: torchao is imported lazily)."""
    return type(weight).__name__ == "Int8Tensor"


def tensor_bytes(tensor: torch.Tensor) -> int:
    """Bytes a tensor holds: a tensor subclass (torchao's) counts its inner tensors."""
    flatten = getattr(type(tensor), "__tensor_flatten__", None)
    if flatten is not None and type(tensor) is not torch.Tensor and type(tensor) is not nn.Parameter:
        names, _ = tensor.__tensor_flatten__()
        return sum(tensor_bytes(getattr(tensor, name)) for name in names)
    return tensor.numel() * tensor.element_size()


def weight_bytes(module: nn.Module) -> int:
    """Bytes of a module's parameters and buffers (each shared tensor once)."""
    seen, total = set(), 0
    for tensor in [*module.parameters(), *module.buffers()]:
        if id(tensor) not in seen:
            seen.add(id(tensor))
            total += tensor_bytes(tensor)
    return total


def quantizable_linears(model: nn.Module) -> list[str]:
    """Names of the ``nn.Linear`` layers :func:`quantize_weights` quantises (see the module docstring)."""
    in_groups = {name.rsplit(".", 1)[0] for group in QUANTIZED_GROUPS
                 for name, _ in model.parameter_groups()[group]}
    in_mha = {f"{name}.{child}" for name, m in model.named_modules() if isinstance(m, nn.MultiheadAttention)
              for child, _ in m.named_children()}
    return [name for name, m in model.named_modules()
            if isinstance(m, nn.Linear) and name in in_groups and name not in in_mha]


def quantized_weight_bytes(model: nn.Module, scheme: str = "int8") -> int:
    """The weight bytes ``model`` would hold after :func:`quantize_weights`, from shapes alone (works on a
    model built on the meta device): every other tensor keeps its dtype."""
    check_scheme(scheme)
    modules = dict(model.named_modules())
    quantized = {id(modules[name].weight): modules[name].weight for name in quantizable_linears(model)}
    saved = sum(w.numel() * w.element_size() - (w.numel() + INT8_ROW_OVERHEAD_BYTES * w.shape[0])
                for w in quantized.values())
    return weight_bytes(model) - saved


@contextmanager
def _quiet_import():
    """torchao logs a warning per CUDA kernel library it cannot load on a CPU-only build; silenced."""
    loggers = [logging.getLogger(name) for name in ("torchao", "torch.utils._pytree")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def quantize_weights(model: nn.Module, scheme: str) -> QuantizationReport:
    """Quantise ``model`` (a :class:`models.grove.Grove`) in place with ``scheme`` (one of :data:`SCHEMES`)
    and switch it to eval mode; returns what was done. Apply it after the weights are loaded and
    after any dtype cast."""
    check_scheme(scheme)
    modules = dict(model.named_modules())
    names = quantizable_linears(model)
    done = [name for name in names if is_int8(modules[name].weight)]
    if done:
        raise ValueError(f"quantize_weights: the model is already quantised ({done[0]} holds int8 weights)")
    with _quiet_import():
        from torchao.quantization import Int8WeightOnlyConfig, quantize_
    before = weight_bytes(model)
    chosen = set(names)
    # set_inductor_config=False: quantising must not change torch.compile's global settings
    quantize_(model, Int8WeightOnlyConfig(set_inductor_config=False), filter_fn=lambda _m, fqn: fqn in chosen)
    model.eval()
    return QuantizationReport(scheme, tuple(names), before, weight_bytes(model))


__all__ = ["SCHEMES", "QUANTIZED_GROUPS", "QuantizationReport", "check_scheme", "is_int8", "tensor_bytes",
           "weight_bytes", "quantizable_linears", "quantized_weight_bytes", "quantize_weights"]
