"""Referring grounding: a phrase or sentence a user asks, grounded through a whole video, and the benchmarks
that score it (a synthetic referring set with known answers; MeViS and Ref-YouTube-VOS from their files)."""
