"""What a command imports before it can print its help: ``grove --help`` nothing of torch, every
``grove VERB --help`` that is not LightningCLI's no Lightning, torchmetrics, torchvision, transformers
or open_clip, and ``cli.py predict --help`` none of the project's callbacks, models or data modules
(each costs seconds of start-up: docs/input_pipeline.md, "Start-up"; bench/bench_startup.py times them).
Each check runs in a fresh interpreter, as a user's command does."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from command_line.grove import TRAINING_VERBS, VERBS
from tests.fixtures.paths import ROOT

HEAVY = ("lightning", "torchmetrics", "torchvision", "transformers", "open_clip")
# verbs whose help needs these by design or for now, and why
HEAVY_HELP = {
    **{verb: "LightningCLI's help (python cli.py)" for verb in TRAINING_VERBS},
    "demo": "passes its arguments to cli.py fit, whose help is LightningCLI's",
}


def _modules_after(code: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# each verb's --help in turn; a heavy package is charged to the first verb after which it is loaded
VERB_HELP = r"""
import json, sys
from command_line.grove import main
heavy = json.loads(sys.argv[1])
seen, found = set(), {}
for verb in sys.argv[2:]:
    try:
        main([verb, "--help"])
    except SystemExit as done:
        assert done.code in (0, None), (verb, done.code)
    loaded = {name for name in heavy if name in sys.modules}
    found[verb] = sorted(loaded - seen)
    seen |= loaded
print(json.dumps(found))
"""


def test_grove_help_imports_no_torch():
    loaded = _modules_after("import json, sys\nfrom command_line.grove import main\nmain(['--help'])\n"
                            "print(json.dumps(sorted(m for m in ('torch', 'core', 'numpy') if m in sys.modules)))")
    assert loaded == []


def test_verb_help_imports_no_lightning_torchmetrics_torchvision_transformers():
    verbs = [verb for verb in VERBS if verb not in HEAVY_HELP]
    found = _modules_after(VERB_HELP, json.dumps(HEAVY), *verbs)
    assert list(found) == verbs
    assert {verb: modules for verb, modules in found.items() if modules} == {}


def test_cli_help_builds_lightnings_parser_without_the_projects_classes():
    code = ("import json, runpy, sys\nsys.argv = ['cli.py', 'predict', '--help']\n"
            "try:\n    runpy.run_path('cli.py', run_name='__main__')\nexcept SystemExit as done:\n"
            "    assert done.code in (0, None), done.code\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules}"
            " & {'callbacks', 'models', 'lightning_modules', 'datamodules', 'open_clip', 'torchao'})))")
    assert _modules_after(code) == []
