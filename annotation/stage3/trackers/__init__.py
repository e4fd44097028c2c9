"""Box trackers for Stage 3 by tracking: the shared interface and point-track geometry
(:mod:`~annotation.stage3.trackers.box_tracking`, with the synthetic oracle), CoTracker3 and SAM 2."""
