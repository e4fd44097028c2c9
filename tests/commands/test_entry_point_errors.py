"""The entry points themselves (``grove VERB``, ``python cli.py``) end bad input in one ``error:``
line and a non-zero exit, never a traceback: the in-process cases of test_bad_input.py call
``run_command`` directly and would not see a ``__main__`` that skips it."""
import os
import subprocess
import sys

import pytest

from tests.fixtures.paths import ROOT
from tests.fixtures.tiny_cli import tiny_cli_args


def _one_error_line(args, expected):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode not in (0, None)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0], done.stderr[-3000:]


@pytest.mark.parametrize("make,expected", [
    (lambda tmp: ["--split", str(tmp / "absent"), "--pred", str(tmp / "absent.json")], "meta_expressions.json"),
    (lambda tmp: ["--split", str(tmp), "--pred", str(tmp / "absent.json")], "meta_expressions.json"),
])
def test_grove_mevis(tmp_path, make, expected):
    (tmp_path / "meta_expressions.json").write_text('{"videos": 3}')
    _one_error_line(["-c", "from command_line.grove import main; main()", "mevis", *make(tmp_path)], expected)


@pytest.mark.slow
@pytest.mark.parametrize("subcommand,option,expected", [
    ("fit", "--model.init_args.weight_quantization=int8", "quantised weights are for predict, test and validate"),
    ("test", "--model.init_args.weight_quantization=int4", "unknown weight quantization scheme 'int4'"),
])
def test_cli_quantisation_refusals(tiny_synthetic_root, tmp_path, subcommand, option, expected):
    _one_error_line([str(ROOT / "cli.py"), subcommand, *tiny_cli_args(tiny_synthetic_root, tmp_path), option],
                    expected)


@pytest.mark.parametrize("subcommand", ["test", "predict"])
def test_cli_refuses_an_official_hub_folder_as_ckpt_path(tiny_synthetic_root, tmp_path, subcommand):
    import json

    from tests.models.test_hub_config import HUB_CONFIG, HUB_PREPROCESSOR

    hub = tmp_path / "hub"
    hub.mkdir()
    (hub / "config.json").write_text(json.dumps(HUB_CONFIG))
    (hub / "preprocessor_config.json").write_text(json.dumps(HUB_PREPROCESSOR))
    (hub / "model.safetensors").write_bytes(b"")
    _one_error_line([str(ROOT / "cli.py"), subcommand, *tiny_cli_args(tiny_synthetic_root, tmp_path),
                     "--ckpt_path", str(hub)], f"grove convert-grove {hub}")
