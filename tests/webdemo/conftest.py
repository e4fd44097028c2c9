"""A tiny trained checkpoint shared by the demo's tests."""
import pytest

from tests.webdemo.tiny_model import fit_tiny


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_synthetic_root, tmp_path_factory):
    return fit_tiny(tiny_synthetic_root, tmp_path_factory.mktemp("tiny_fit"))
