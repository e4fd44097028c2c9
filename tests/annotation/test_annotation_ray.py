"""The Ray engine on a local Ray instance with 2 CPUs writes the same records as the local engine
(a corrupt video among the clips is skipped by both)."""
from pathlib import Path

import pytest

pytest.importorskip("ray")

from annotation.commands.run import run_annotation
from annotation.config import load_config
from formats.records import read_records

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "annotation"
FILES = [str(CONFIGS / "synthetic.yaml")]  # the noisy Stage 1: equal outputs need the same seeded noise


@pytest.mark.slow
def test_ray_engine_writes_the_same_records_as_the_local_engine(tmp_path):
    import ray

    from datamodules.synthetic import generate_synthetic_dataset

    paths = generate_synthetic_dataset(tmp_path / "syn", num_train=0, num_val=0, num_test=5, seed=0, workers=1,
                                       duration_s=2.0)
    videos = tmp_path / "syn" / "videos"
    victim = sorted(videos.glob("*.mp4"))[2]
    victim.write_bytes(victim.read_bytes()[:500])
    config = load_config(FILES, {"engine": {"batch_size": 2, "torch_threads": 1,
                                            "ray": {"num_cpus": 2, "frame_actors": 1, "text_actors": 1,
                                                    "object_store_mb": 256}}})
    local = run_annotation(config, FILES, videos, tmp_path / "local", paths["test"], engine="local", progress=False)
    try:
        remote = run_annotation(config, FILES, videos, tmp_path / "ray", paths["test"], engine="ray", progress=False)
    finally:
        ray.shutdown()
    assert local["clips"] == remote["clips"] and local["clips"]["accepted"] == 4
    assert local["skipped_corrupt"] == remote["skipped_corrupt"] and victim.stem in remote["skipped_corrupt"]
    assert set(remote["stages"]) >= {"decode", "stage1", "stage2", "stage3"} and remote["engine"] == "ray"
    a = {r.key: r.to_dict() for r in read_records(tmp_path / "local" / "annotations")}
    b = {r.key: r.to_dict() for r in read_records(tmp_path / "ray" / "annotations")}
    assert a == b and len(a) == 4


def test_a_cluster_job_ships_the_repository_root():
    from annotation.engines.ray import REPO_ROOT

    assert (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "annotation" / "__main__.py").is_file()
