"""Starts fine-tuning from a pre-trained checkpoint's weights (PT+FT), not from its training state.

``--ckpt_path`` resumes a run: optimizer, schedule, epoch and step come back too. Fine-tuning on
iGround, VidSTG or ActivityNet-Entities from the HowToGround1M model must instead start a new
run from the pre-trained weights alone. This callback loads them in ``setup`` (before the
optimizer exists); when the run itself resumes with ``--ckpt_path``, Lightning restores that
checkpoint after ``setup``, so the resumed (fine-tuned) weights win. The weights are read by
:func:`core.weights.load_state_dict_file` (tensors only: a file that would run code is refused).
"""
from __future__ import annotations

from core.init_time_paths import exported_module
from core.weights import load_state_dict_file
from core.weights.pretrained_folder import is_pretrained_folder, load_weights

import logging
from pathlib import Path

import lightning as L

log = logging.getLogger(__name__)


class InitFromCheckpoint(L.Callback):
    """Load model weights from ``checkpoint_path`` when fitting starts (not the training state).

    Args:
        checkpoint_path: a Lightning ``.ckpt`` of a GroveModule, a plain state dict or an exported folder
            (``grove export``).
        strict: every key must match (the same architecture); ``False`` loads what matches and
            logs the rest.
        drop_prefixes: checkpoint keys to leave out before a strict load, e.g. the pre-trained
            objectness head (``model.objectness_head.``) when fine-tuning without one.
    """

    def __init__(self, checkpoint_path: str, strict: bool = True, drop_prefixes: list[str] | None = None):
        if not Path(checkpoint_path).exists():
            raise FileNotFoundError(
                f"trainer.callbacks[InitFromCheckpoint].init_args.checkpoint_path: {checkpoint_path!r} does not "
                "exist. See the README section 'Datasets' (pre-train first, or download the pre-trained "
                "checkpoint), or remove this callback to fine-tune from scratch")
        self.checkpoint_path = str(checkpoint_path)
        self.strict = strict
        self.drop_prefixes = tuple(drop_prefixes or ())
        self.loaded = False

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage != "fit" or self.loaded:
            return
        if is_pretrained_folder(self.checkpoint_path):  # an exported folder: its weights, under the module's prefix
            _, _, prefix = exported_module(self.checkpoint_path)
            state = {prefix + k: v for k, v in load_weights(self.checkpoint_path).items()}
        else:
            state = load_state_dict_file(self.checkpoint_path,
                                         "trainer.callbacks[InitFromCheckpoint].init_args.checkpoint_path")
        if self.drop_prefixes:
            state = {k: v for k, v in state.items() if not k.startswith(self.drop_prefixes)}
        result = pl_module.load_state_dict(state, strict=self.strict)
        if result.missing_keys or result.unexpected_keys:
            log.warning("%s: %d missing and %d unexpected keys (e.g. %s)", self.checkpoint_path,
                        len(result.missing_keys), len(result.unexpected_keys),
                        (result.missing_keys + result.unexpected_keys)[:3])
        self.loaded = True
        log.info("initialised the model from the weights of %s", self.checkpoint_path)
