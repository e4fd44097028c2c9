"""models."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)

# Lazy re-exports: importing ``models`` (e.g. for the loss) must not pull in transformers/open_clip.
_EXPORTS = {
    "Grove": "models.grove", "GroveOutput": "models.grove", "build_on_meta": "models.grove",
    "GroveLoss": "models.loss", "GroundedCaptionPrompter": "models.prompting",
    "GlobalEncoderConfig": "models.configs", "GroundingEncoderConfig": "models.configs",
    "LanguageModelConfig": "models.configs", "DecoderConfig": "models.configs", "tiny_configs": "models.configs",
    "paper_configs": "models.configs",
}


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'models' has no attribute {name!r}")
