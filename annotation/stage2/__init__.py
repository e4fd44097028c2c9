"""Stage 2, video-level caption aggregation (GROVE paper, section 3): frame captions -> one caption
with ``<p></p>``-tagged phrases.

:mod:`~annotation.stage2.svo` extracts the Subject-Verb-Object triplets the LLM is shown;
:mod:`~annotation.stage2.caption_aggregation` holds the LLM and the offline rule aggregators.
"""
