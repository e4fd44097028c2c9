"""GLaMM's released checkpoint: check a folder, caption images and videos with it, write the GLaMM
baselines (the commands are :mod:`glamm.commands`; ``python scripts/glamm.py --help``)."""
import sys

from glamm.commands import main

if __name__ == "__main__":
    sys.exit(main())
