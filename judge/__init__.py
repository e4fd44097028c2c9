"""VC-Inspector, a reference-free caption judge (VC-Inspector paper), as one feature package.

Its parts: :mod:`judge.model` (the Qwen2.5-VL judge, its prompt and answer format, the prompter,
the toy judge's tokenizer, the exported folder, the same judge behind an endpoint),
:mod:`judge.data` (readers, the corruption generator that makes the training data, the Dataset
and DataModule, the pairs to score), :mod:`judge.training` (the LightningModule, the
human-correlation metric, the toy judge's vision pretext) and :mod:`judge.application` (loading
a judge, scoring, FOIL hallucination accuracy, refinement, the GROVE-side callback and the
commands of ``grove judge``). Packages below it (``models``, ``datamodules``, ``metrics``,
``lightning_modules``, ``callbacks``, ``core``) never import it.
"""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)
