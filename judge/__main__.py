"""Command line: ``grove judge {corrupt,score,foil,refine} ...`` (docs/judge.md)."""
import core  # noqa: F401  (torchvision compatibility: must precede lightning)

import sys

from judge.application.commands import main

if __name__ == "__main__":
    main(sys.argv[1:])
