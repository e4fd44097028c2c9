"""How big a model is: its FLOPs per forward pass (:mod:`sizing.flops`) and its memory per GPU for
training and per precision for inference (:mod:`sizing.memory_estimator`)."""
