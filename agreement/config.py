"""Agreement-suite configs: which benchmarks (reader + files) and which metrics (scorer + weights).

    num_frames: 8                     # frames per clip for every visual metric
    prepare_synthetic: {root: data/agreement, num_clips: 30}   # optional: build the synthetic sets
    benchmarks:
      VATEX-Eval: {reader: vatex_eval, path: data/vatex_eval, n_refs: 0, media_root: data/vatex/videos}
    metrics:
      CLIPScore: {kind: clipscore, towers: {open_clip: ViT-B-32-quickgelu, checkpoint: ckpt/clip.pt}}
      mine: {class_path: mypackage.MyScorer, init_args: {}}

``{synthetic.videos}`` and ``{synthetic.corruptions}`` in a path are replaced with the prepared
synthetic data's paths. A metric whose weights are not set or not on disk is skipped, naming the
key to set; so is a benchmark whose files are missing.
"""
from __future__ import annotations

from core.class_paths import ClassPathError, instantiate_class_path

from pathlib import Path
from typing import Any, Mapping

from agreement.benchmarks import detailcaps, fg_eval, foil, human_rated
from agreement.benchmarks.items import Benchmark
from agreement.scorers.base import CaptionScorer, MissingWeights
from metrics.functional.embedding_scores import CLIP_SCORE_W, PACS_W

READERS = {
    "vatex_eval": human_rated.read_vatex_eval,
    "youcook2_eval": human_rated.read_youcook2_eval,
    "flickr8k": human_rated.read_flickr8k,
    "foil_coco": foil.read_foil_coco,
    "activitynet_foil": foil.read_activitynet_foil_benchmark,
    "synthetic_foil": foil.read_synthetic_foil,
    "detailcaps": detailcaps.read_detailcaps,
    "fg_eval": fg_eval.read_fg_eval,
}
_PATH_ARGS = ("path", "coco_captions")


class ConfigError(ValueError):
    """A malformed agreement config; the message names the key."""


def _substitute(value: Any, paths: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for name, path in paths.items():
            value = value.replace("{synthetic." + name + "}", str(path))
    return value


def build_benchmark(name: str, spec: Mapping[str, Any], paths: Mapping[str, str]) -> Benchmark:
    """A benchmark from its config entry; ``FileNotFoundError`` names the key when a file is missing."""
    key = f"benchmarks.{name}"
    if not isinstance(spec, Mapping) or spec.get("reader") not in READERS:
        got = spec.get("reader") if isinstance(spec, Mapping) else spec
        raise ConfigError(f"{key}.reader: one of {', '.join(READERS)}; got {got!r}")
    args = {k: _substitute(v, paths) for k, v in spec.items() if k not in ("reader", "media_root", "limit")}
    for arg in _PATH_ARGS:
        if arg in args and args[arg] is not None and not Path(args[arg]).exists():
            raise FileNotFoundError(f"set {key}.{arg} ({args[arg]} does not exist)")
    if "path" not in args and spec["reader"] != "activitynet_foil":
        raise ConfigError(f"{key}.path: the benchmark's file or folder is required")
    if spec["reader"] == "activitynet_foil":
        if not Path(args.get("folder", "")).exists():
            raise FileNotFoundError(f"set {key}.folder (the ActivityNet-FOIL release folder)")
    benchmark = READERS[spec["reader"]](**args).subset(spec.get("limit"))
    benchmark.name = name
    benchmark.media_root = str(_substitute(spec.get("media_root", "."), paths))
    return benchmark


def _towers(spec: Mapping[str, Any], key: str, device: str):
    from agreement.scorers.towers import load_towers

    if not isinstance(spec, Mapping) or not spec:
        raise MissingWeights(f"{key}", "the towers: open_clip + checkpoint, hf_clip, or a tiny *_config")
    if "open_clip" in spec and not (spec.get("checkpoint") and Path(spec["checkpoint"]).exists()):
        raise MissingWeights(f"{key}.checkpoint", f"a local {spec['open_clip']} weight file")
    if "hf_clip" in spec and not (spec["hf_clip"] and Path(spec["hf_clip"]).is_dir()):
        raise MissingWeights(f"{key}.hf_clip", "a local transformers CLIP folder")
    return load_towers(spec, key, device)


def build_scorer(name: str, spec: Mapping[str, Any], device: str = "cpu") -> CaptionScorer:
    """A scorer from its config entry (module docstring); raises :class:`MissingWeights`."""
    from agreement.scorers import embedding, judge, reference_metrics

    key = f"metrics.{name}"
    spec = dict(spec or {})
    if "class_path" in spec:
        try:
            scorer = instantiate_class_path(spec, CaptionScorer, key)
        except ClassPathError as err:
            raise ConfigError(str(err)) from None
        scorer.name = getattr(scorer, "name", name)
        return scorer
    kind = spec.pop("kind", None)
    if kind in ("clipscore", "pacs"):
        towers = _towers(spec.pop("towers", None), f"{key}.towers", device)
        spec.setdefault("w", PACS_W if kind == "pacs" else CLIP_SCORE_W)
        return embedding.ClipScoreScorer(towers, name=name, **spec)
    if kind == "emscore":
        return embedding.EMScoreScorer(_towers(spec.pop("towers", None), f"{key}.towers", device), name=name, **spec)
    if kind == "viclipscore":
        from agreement.scorers.viclip import load_viclip

        towers = spec.pop("towers", None)
        if not isinstance(towers, Mapping) or not (towers.get("architecture") or towers.get("checkpoint")):
            raise MissingWeights(f"{key}.towers.checkpoint", "a local ViCLIP release, e.g. "
                                 "ViCLIP-L_InternVid-FLT-10M.pth, with towers.size L or B")
        if towers.get("checkpoint") and not Path(towers["checkpoint"]).is_file():
            raise MissingWeights(f"{key}.towers.checkpoint", f"{towers['checkpoint']} does not exist")
        return embedding.ViClipScoreScorer(load_viclip(towers, f"{key}.towers", device), name=name, **spec)
    if kind == "caption_metric":
        return reference_metrics.CaptionMetricScorer(name=name, **spec)
    if kind == "capture":
        return reference_metrics.CaptureMetricScorer(name=name, **spec)
    if kind == "judge":
        if not (spec.get("ckpt_path") or spec.get("judge_path")):
            raise MissingWeights(f"{key}.ckpt_path", "a trained judge checkpoint for the config, or "
                                 f"{key}.judge_path for released VC-Inspector weights")
        for k in ("ckpt_path", "judge_path"):
            if spec.get(k) and not Path(spec[k]).exists():
                raise MissingWeights(f"{key}.{k}", f"{spec[k]} does not exist")
        return judge.load_judge_scorer(name=name, **spec)
    raise ConfigError(f"{key}.kind: one of clipscore, pacs, emscore, viclipscore, caption_metric, capture, judge "
                      f"(or class_path for your own scorer); got {kind!r}")
