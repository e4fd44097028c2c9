"""``grove glamm`` runs from the command line."""
import core  # noqa: F401

import os
import subprocess
import sys

from tests.fixtures.paths import ROOT


def test_the_script_runs_from_the_command_line():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "command_line.grove", "glamm", "--help"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    for command in ("check", "grove-init", "caption", "baseline"):
        assert command in result.stdout
