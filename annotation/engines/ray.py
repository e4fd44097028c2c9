"""The Ray engine: the same workers as the local engine, as a Ray Data pipeline.

Decoding + Stage 1 run as ``map_batches`` over an actor pool of :class:`FrameWorker` (one model
load per actor, a GPU per actor when the cluster has GPUs and Stage 1 uses a model), Stages 2-3
over a second pool of :class:`TextWorker` (CPU actors; with an ``llm`` backend of type
``openai`` they are clients of an LLM server). Rows carry plain JSON strings, so what reaches the
driver is exactly what the local engine would produce; the driver writes the records, so the
output folder, resume and report are shared with the local engine.

By default a local Ray instance is started (``engine.ray.num_cpus`` CPUs); with ``address`` the
pipeline joins an existing cluster, shipping this repository as the job's working directory
(videos, ground truth and the output folder must then be on storage every node sees).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import numpy as np

from annotation.clips import ClipSpec, SkippedClip
from annotation.outcomes import Rejection
from annotation.stage1.frame_annotations import ClipFrameAnnotations
from formats.records import GroundedRecord

REPO_ROOT = Path(__file__).resolve().parents[2]
TIMED = ("decode", "stage1", "stage3_tracking", "stage2", "stage3", "tracks")
# what a cluster job does not need from the repository
_UPLOAD_EXCLUDES = [".git", ".venv", "data", "runs", "lightning_logs", "**/*.pkl", "**/*.mp4", "**/*.ckpt",
                    "**/*.safetensors", "**/*.bin", "**/*.pth", "**/__pycache__"]


def _column(values) -> np.ndarray:
    values = list(values)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


class FrameActor:
    """Ray actor: decoding + Stage 1 (a :class:`FrameWorker`) over batches of clip specs."""

    def __init__(self, config: dict, videos: str, truth: str | None):
        import core  # noqa: F401  (torchvision shim in the worker process)

        from annotation.engines.workers import FrameWorker

        self.worker = FrameWorker(config, videos, truth)

    def __call__(self, batch: dict) -> dict:
        specs = [ClipSpec.from_dict(json.loads(s)) for s in batch["spec"]]
        results, timings = self.worker.run(specs)
        share = {k: v / max(1, len(specs)) for k, v in timings.items()}
        kinds, payloads = [], []
        for r in results:
            if isinstance(r, SkippedClip):
                kinds.append("skipped")
                payloads.append(json.dumps({"key": r.key, "video_fname": r.video_fname, "reason": r.reason}))
            else:
                kinds.append("frames")
                payloads.append(json.dumps(r.to_dict()))
        out = {"key": _column(s.key for s in specs), "kind": _column(kinds), "payload": _column(payloads)}
        for stage in TIMED:
            out[f"t_{stage}"] = np.full(len(specs), share.get(stage, 0.0), dtype=np.float64)
        return out


class TextActor:
    """Ray actor: Stages 2-3 and tracks (a :class:`TextWorker`) over batches of Stage 1 outputs."""

    def __init__(self, config: dict):
        import core  # noqa: F401

        from annotation.engines.workers import TextWorker

        self.worker = TextWorker(config)

    def __call__(self, batch: dict) -> dict:
        kinds, payloads = list(batch["kind"]), list(batch["payload"])
        todo = [i for i, k in enumerate(kinds) if k == "frames"]
        clips = [ClipFrameAnnotations.from_dict(json.loads(payloads[i])) for i in todo]
        results, timings = self.worker.run(clips)
        out_kinds, out_payloads = list(kinds), list(payloads)
        for i, r in zip(todo, results):
            if isinstance(r, GroundedRecord):
                out_kinds[i], out_payloads[i] = "record", json.dumps(r.to_dict())
            else:
                out_kinds[i], out_payloads[i] = "rejection", json.dumps(r.to_dict())
        out = {"key": _column(batch["key"]), "kind": _column(out_kinds), "payload": _column(out_payloads)}
        readable = np.zeros(len(kinds), dtype=bool)
        readable[todo] = True
        for stage in TIMED:
            if stage in timings:
                out[f"t_{stage}"] = np.where(readable, timings[stage] / max(1, len(todo)), 0.0)
            else:
                out[f"t_{stage}"] = np.asarray(batch[f"t_{stage}"], dtype=np.float64)
        return out


def result_of(kind: str, payload: str):
    """A driver-side row back into a record, rejection or skipped clip."""
    data = json.loads(payload)
    if kind == "record":
        return GroundedRecord.from_dict(data, source="ray worker")
    if kind == "rejection":
        return Rejection(**data)
    if kind == "skipped":
        return SkippedClip(**data)
    raise ValueError(f"unexpected row kind {kind!r} from the Ray pipeline")


class RayEngine:
    name = "ray"

    def __init__(self, config: dict, videos: str | Path, truth: str | Path | None = None, progress: bool = True,
                 address: str | None = None):
        self.config, self.videos, self.truth = config, str(Path(videos).resolve()), truth
        self.truth = None if truth is None else str(Path(truth).resolve())
        self.progress, self.address = progress, address

    def _init_ray(self):
        import ray

        if ray.is_initialized():
            return ray
        options = self.config["engine"]["ray"]
        if self.address:
            ray.init(address=self.address, runtime_env={"working_dir": str(REPO_ROOT), "excludes": _UPLOAD_EXCLUDES},
                     log_to_driver=True)
        else:
            store = options.get("object_store_mb")
            ray.init(num_cpus=options.get("num_cpus"), include_dashboard=False, log_to_driver=False,
                     object_store_memory=None if store is None else int(store) * 1024 * 1024,
                     runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}})
        return ray

    def process(self, specs: list[ClipSpec]) -> Iterator[tuple[list, dict[str, float], int, int]]:
        self._init_ray()
        import ray.data  # binds ``ray`` to the module _init_ray initialised

        options = self.config["engine"]["ray"]
        batch_size = int(self.config["engine"]["batch_size"])
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = bool(self.progress)
        gpus = options.get("gpus_per_frame_actor")
        if gpus is None:
            uses_model = (self.config["stage1"]["backend"] != "noisy_oracle"
                          or self.config["stage3"]["backend"] in ("cotracker", "sam2"))  # trackers run here
            gpus = 1 if uses_model and ray.cluster_resources().get("GPU", 0) > 0 else 0
        cpus = float(options["cpus_per_actor"])
        items = [{"spec": json.dumps(s.to_dict())} for s in specs]
        blocks = max(1, min(len(items), -(-len(items) // batch_size)))
        ds = ray.data.from_items(items, override_num_blocks=blocks)
        ds = ds.map_batches(FrameActor, fn_constructor_kwargs={"config": self.config, "videos": self.videos,
                                                               "truth": self.truth},
                            batch_size=batch_size, batch_format="numpy",
                            compute=ray.data.ActorPoolStrategy(size=int(options["frame_actors"])),
                            num_cpus=cpus, num_gpus=gpus)
        ds = ds.map_batches(TextActor, fn_constructor_kwargs={"config": self.config}, batch_size=batch_size,
                            batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=int(options["text_actors"])),
                            num_cpus=cpus)
        for batch in ds.iter_batches(batch_size=batch_size, batch_format="numpy"):
            results = [result_of(k, p) for k, p in zip(batch["kind"], batch["payload"])]
            readable = sum(not isinstance(r, SkippedClip) for r in results)
            frame_t = {s: float(np.sum(batch[f"t_{s}"])) for s in ("decode", "stage1", "stage3_tracking")}
            text_t = {s: float(np.sum(batch[f"t_{s}"])) for s in ("stage2", "stage3", "tracks")}
            yield results, {**frame_t, **text_t}, len(results), readable
