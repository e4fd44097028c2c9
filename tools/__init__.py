"""Tools around training that are neither a model, data, a metric nor a LightningModule: the
per-GPU memory estimator of a training config, the tiny demo's vision-tower pre-training and the
GLaMM baselines' prediction writer."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)
