"""How the stages run over many clips: the two workers every engine runs
(:mod:`~annotation.engines.workers`: frames = decode + Stage 1, text = Stages 2-3 + tracks), in one
process (:mod:`~annotation.engines.local`) or as a Ray Data pipeline (:mod:`~annotation.engines.ray`)."""
