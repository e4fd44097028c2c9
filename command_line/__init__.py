"""The command-line layer: what only ``python cli.py`` needs, on top of every package; imported by
entry points only (``pyproject.toml``'s import contracts keep it so)."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)
