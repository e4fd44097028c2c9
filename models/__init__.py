"""Plain nn.Modules of GROVE (encoders, adapters, language model, box decoder, heads, loss); no Lightning.

Import each from its module (``models.grove.Grove``), so that importing one part does not pull in
transformers or open_clip."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)
