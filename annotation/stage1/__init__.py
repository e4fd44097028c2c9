"""Stage 1, frame-wise grounded captions (GROVE paper, section 3): per sampled frame, a caption and
(phrase, box) pairs.

:mod:`~annotation.stage1.frame_annotations` is what the stage hands on,
:mod:`~annotation.stage1.decoding` the frames it looks at; the backends are
:mod:`~annotation.stage1.glamm_annotator` (the paper's Stage 1),
:mod:`~annotation.stage1.captioner_detector` (its "Alt. Stage 1": a captioner + OWLv2),
:mod:`~annotation.stage1.detail_caption_annotator` (the same with the CAPTURE paper's detail captions,
:mod:`~annotation.stage1.detail_captions` and its models) and
:mod:`~annotation.stage1.noisy_oracle` (synthetic data: the truth with configurable noise).
"""
