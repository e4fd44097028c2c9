"""Plain nn.Modules, no Lightning: one folder per model family (``grove``: GROVE; ``cotracker3``:
the annotation pipeline's point tracker) and the building blocks more than one family uses
(``tiny_tokenizer``: the offline byte-level BPE of the tiny GROVE and the toy judge;
``patch_pretext``: the dense phrase-word pretext of the demo's GROVE towers and the toy judge's
vision tower)."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)
