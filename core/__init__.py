"""Low-level pieces every package may use, importing nothing of the project's above them.

The torchvision compatibility shim (imported here, so ``import core`` must come before torchvision),
box ops, image preprocessing, drawing, safe file names and atomic output files, bounds on text,
argparse types, paths of generated data, the OpenAI-compatible chat request, the recursive config
merge and config loading (:mod:`core.config_loader`), and the one home for weights and checkpoints
(:mod:`core.weights`).
"""
from core import torchvision_compat as _torchvision_compat  # noqa: F401  (must run before torchvision)

# transformers imports torchao (when installed) on every LLaMA import; on a CPU-only machine torchao
# logs one warning per CUDA kernel library it cannot load, and torch one per Enum torchao registers.
# Neither affects weight-only int8 (models.grove.quantization), which runs on the CPU too.
import logging as _logging  # noqa: E402

for _name in ("torchao", "torch.utils._pytree"):
    _logging.getLogger(_name).setLevel(_logging.ERROR)
