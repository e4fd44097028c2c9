"""Automatic annotation of unlabelled videos with grounded captions (GROVE paper, section 3).

Stage 1 writes a grounded caption per sampled frame, Stage 2 aggregates them into one video-level
caption with ``<p></p>``-tagged phrases, Stage 3 assigns every frame-level box to one of those
phrases (or to none), so boxes of one phrase form a track. Records come out in the HowToGround1M
per-key pickle layout that ``datamodules/`` trains on. Run with ``python -m annotation run``.
"""
