"""GLaMM's released checkpoint: check a folder, caption images and videos with it, write the GLaMM
baselines (the commands are :mod:`glamm.commands`; ``python scripts/glamm.py --help``)."""
import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, and this file's name would shadow the
# glamm package: look the package up without it.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from core.user_errors import run_command  # noqa: E402

from glamm.commands import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(main))
