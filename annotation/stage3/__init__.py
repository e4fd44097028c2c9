"""Stage 3, temporally consistent boxes (GROVE paper, section 3): every frame-level box gets one
video-level phrase (or none), and boxes of one phrase form its track.

By language ("tracking by language", the paper's Stage 3): :mod:`~annotation.stage3.phrase_classification`
(LLM or sentence-embedding classifier). By tracking (the paper's "Alt. Stage 3"):
:mod:`~annotation.stage3.by_tracking` with the box trackers of :mod:`annotation.stage3.trackers`.
:mod:`~annotation.stage3.tracks` turns either result into a record.
"""
