"""The CI check of the house rules (.ci/house_rules.py): sys.path edits and underscored options in
bench/ and experiments/, and files over 600 lines outside tests/, each named with its line."""
import subprocess
import sys
import textwrap

from tests.fixtures.paths import ROOT

SCRIPT = ROOT / ".ci" / "house_rules.py"


def _repo(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "."], cwd=root, check=True)


def _run(root):
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True, timeout=120)


def test_each_broken_rule_is_named_with_its_line(tmp_path):
    _repo(tmp_path, {
        "bench/bench_x.py": """\
            import sys
            sys.path.insert(0, ".")
            sys.path[:] = []
            parser.add_argument("--ckpt_path", "--other")
            parser.add_argument("--frames-per-batch", type=int)
            """,
        "experiments/probe.py": "sys.path += ['..']\nparser.add_argument('-x', '--model_config')\n",
        "core/long.py": "x = 1\n" * 601,
        "tests/test_long.py": "x = 1\n" * 700,
        "core/short.py": "sys.path.append('.')\nparser.add_argument('--a_b')\n",  # rules of bench/ only
    })
    result = _run(tmp_path)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "bench/bench_x.py:2: edits sys.path (the editable install and PYTHONPATH find the packages)",
        "bench/bench_x.py:3: edits sys.path (the editable install and PYTHONPATH find the packages)",
        "bench/bench_x.py:4: option --ckpt_path is spelled with underscores (use --ckpt-path)",
        "core/long.py:1: 601 lines (at most 600 outside tests/): split it by concept",
        "experiments/probe.py:1: edits sys.path (the editable install and PYTHONPATH find the packages)",
        "experiments/probe.py:2: option --model_config is spelled with underscores (use --model-config)",
    ]


def test_a_tree_that_keeps_the_rules_passes(tmp_path):
    _repo(tmp_path, {"bench/bench_x.py": "parser.add_argument('--ckpt-path')\nprint(sys.path)\n",
                     "core/ok.py": "x = 1\n" * 600})
    result = _run(tmp_path)
    assert result.returncode == 0 and result.stdout.startswith("house rules kept")
