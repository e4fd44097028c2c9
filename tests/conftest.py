"""Shared pytest fixtures (helpers live in tests/fixtures/); importing core first makes torchvision
importable on CPU torch."""
import core  # noqa: F401

import pytest


@pytest.fixture(scope="session")
def tiny_synthetic_root(tmp_path_factory):
    """A few short synthetic clips (2 s) in the real on-disk layout, shared by the tests."""
    from datamodules.synthetic import generate_synthetic_dataset

    root = tmp_path_factory.mktemp("synthetic")
    generate_synthetic_dataset(root, num_train=6, num_val=2, num_test=2, seed=0, workers=1, duration_s=2.0)
    return root
