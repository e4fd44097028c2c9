"""Tools around training that are neither a model, data, a metric nor a LightningModule: the
per-GPU memory estimator of a training config and the tiny demo's vision-tower pre-training."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)
