"""VC-Inspector, a reference-free caption judge (VC-Inspector paper), as one feature package.

The Qwen2.5-VL judge and its prompt, training data and its corruption generator
(:mod:`judge.data.corruption`), the LightningModule and DataModule, loading, scoring, FOIL,
refinement, the GROVE-side callback, the human-correlation and hallucination metrics, and the
commands (``python -m judge``). Packages below it (``models``, ``datamodules``, ``metrics``,
``lightning_modules``, ``callbacks``, ``core``) never import it.
"""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)
