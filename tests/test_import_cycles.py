"""The CI check for import circles (.ci/import_cycles.py): it passes on the project and fails, naming
the modules, on a package with a planted circle."""
import core  # noqa: F401

import os
import subprocess
import sys
import textwrap

from tests.fixtures.paths import ROOT

SCRIPT = ROOT / ".ci" / "import_cycles.py"


def _run(cwd, *packages):
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([sys.executable, str(SCRIPT), *packages], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def _package(root, name, modules):
    folder = root / name
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for module, source in modules.items():
        (folder / f"{module}.py").write_text(textwrap.dedent(source))


def test_the_project_has_no_import_circle():
    result = _run(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no import circle" in result.stdout


def test_a_planted_circle_fails_naming_its_modules(tmp_path):
    # a -> b at the top, b -> c, and c -> a inside a function (still a circle: the import runs when called)
    _package(tmp_path, "planted", {
        "a": "from planted.b import B\n",
        "b": "from planted.c import C\nB = 1\n",
        "c": "def f():\n    from planted.a import B\n    return B\nC = 2\n",
        "d": "from planted.a import B\n",  # imports into the circle, is not part of it
    })
    result = _run(tmp_path, "planted")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("import circle:")]
    assert lines == ["import circle: planted.a -> planted.b -> planted.c -> planted.a"]
    assert "planted.d" not in result.stdout


def test_a_package_without_circles_passes(tmp_path):
    _package(tmp_path, "layered", {"a": "from layered.b import B\n", "b": "from layered.c import C\nB = 1\n",
                                   "c": "C = 2\n"})
    result = _run(tmp_path, "layered")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_module_importing_itself_is_a_circle(tmp_path):
    _package(tmp_path, "selfish", {"a": "import selfish.a\n"})
    result = _run(tmp_path, "selfish")
    assert result.returncode == 1 and "selfish.a -> selfish.a" in result.stdout
