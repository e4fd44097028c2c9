"""Metrics as agreement scorers (one interface, :class:`agreement.scorers.base.CaptionScorer`)."""
