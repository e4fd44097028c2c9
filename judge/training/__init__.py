"""Training the judge: the LightningModule (:mod:`~judge.training.module`), the rank correlation it is
validated with (:mod:`~judge.training.correlation`), and the toy judge's vision-tower pretext stage
(:mod:`~judge.training.vision_pretext`)."""
