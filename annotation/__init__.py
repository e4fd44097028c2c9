"""Automatic annotation of unlabelled videos with grounded captions (GROVE paper, section 3).

Stage 1 writes a grounded caption per sampled frame, Stage 2 aggregates them into one video-level
caption with ``<p></p>``-tagged phrases, Stage 3 assigns every frame-level box to one of those
phrases (or to none), so boxes of one phrase form a track. Records come out in the HowToGround1M
per-key pickle layout that ``datamodules/`` trains on. Run with ``grove annotate run``.

Parts: :mod:`annotation.stage1`, :mod:`annotation.stage2` and :mod:`annotation.stage3` (each stage
and its backends), :mod:`annotation.llm` (the chat model of Stages 2-3), :mod:`annotation.engines`
(local or Ray), :mod:`annotation.commands` (the subcommands); beside them the run's plumbing:
:mod:`~annotation.config`, :mod:`~annotation.clips` (with :mod:`~annotation.howtocaption`),
:mod:`~annotation.outcomes`, :mod:`~annotation.output` and :mod:`~annotation.report`.
"""
import core  # noqa: F401  (the torchvision shim must run before anything imports torchvision)
