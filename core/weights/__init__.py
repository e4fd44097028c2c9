"""The one home for weights and checkpoints: weight files read as tensors only (safetensors,
``torch.save`` files, TorchScript archives, Hugging Face folders) and Lightning checkpoints read
and written without running code. Every package loads weights through here."""
from core.weights.checkpoints import (
    CKPT_PATH_KEYWORDS,
    lightning_checkpoint,
    read_checkpoint,
    read_checkpoint_hparams,
)
from core.weights.files import (
    WeightFileError,
    load_state_dict_file,
    non_finite_tensors,
    read_safetensors_shapes,
    read_torchscript_tensors,
    read_weights,
)

__all__ = ["CKPT_PATH_KEYWORDS", "WeightFileError", "lightning_checkpoint", "load_state_dict_file",
           "non_finite_tensors", "read_checkpoint", "read_checkpoint_hparams", "read_safetensors_shapes",
           "read_torchscript_tensors", "read_weights"]
