"""The command-line layer: what only ``python cli.py`` needs, on top of every package; imported by
entry points only (``pyproject.toml``'s import contracts keep it so).

The package itself imports nothing, so that ``grove --help`` (:mod:`command_line.grove`) starts
without torch; every module here imports :mod:`core` (the torchvision compatibility shim) before
anything that imports torchvision.
"""
