"""``grove VERB ...``: every command of the project behind one name (``pyproject.toml``'s
``[project.scripts]``, installed by ``make setup``).

Each verb runs a command's own ``main`` (its options are that command's: ``grove VERB --help``)
inside :func:`core.user_errors.run_command`, so bad input ends in one ``error:`` line.
``python cli.py fit|validate|test|predict`` runs the same function as the training verbs.

``grove`` and ``grove --help`` import nothing but this file (no torch: the list of verbs is plain
text); a verb imports :mod:`core` and then its own module only.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable

# verb -> (module, function, what it does); the training verbs go to LightningCLI with the verb kept
VERBS: dict[str, tuple[str, str, str]] = {
    "fit": ("command_line.grove_cli", "cli_main", "train a model (python cli.py fit)"),
    "validate": ("command_line.grove_cli", "cli_main", "validate a checkpoint (python cli.py validate)"),
    "test": ("command_line.grove_cli", "cli_main", "test a checkpoint (python cli.py test)"),
    "predict": ("command_line.grove_cli", "cli_main", "caption and ground videos (python cli.py predict)"),
    "evaluate": ("metrics.commands.evaluate", "main", "score a predictions file against ground truth"),
    "vidstg": ("metrics.commands.vidstg", "main", "VidSTG spatio-temporal grounding evaluation"),
    "anet-entities": ("metrics.commands.anet_entities", "main", "ActivityNet-Entities grounding evaluation"),
    "pointing": ("metrics.commands.pointing", "main", "pointing-game accuracy (YouCook-Interactions, GroundingYT)"),
    "mevis": ("metrics.commands.mevis", "main", "MeViS J&F of predicted masks"),
    "threshold-sweep": ("metrics.commands.threshold_sweep", "main", "the objectness-threshold sweep"),
    "ground": ("command_line.ground", "main", "ground phrases or tagged sentences a user asks on a video"),
    "referring": ("command_line.referring", "main", "referring benchmarks: the synthetic set, MeViS, Ref-YouTube-VOS"),
    "annotate": ("annotation.__main__", "main", "the automatic annotation pipeline"),
    "judge": ("judge.application.commands", "main", "the caption judge"),
    "agreement": ("agreement.__main__", "main", "metric-human agreement tables"),
    "glamm": ("glamm.commands", "main", "GLaMM's released checkpoint and baselines"),
    "webdemo": ("webdemo.__main__", "main", "the browser demo and the long-video timeline"),
    "demo": ("command_line.demo", "main", "the README's demo: towers, fit and test of the tiny GROVE (make demo)"),
    "pretrain-towers": ("lightning_modules.tower_pretraining", "main", "the demo's tower pre-training"),
    "sweep": ("command_line.sweep", "main", "ablation sweeps: fit and score each point, one table"),
    "baselines": ("command_line.baselines", "main", "the caption and grounding baselines on a dataset"),
    "export": ("command_line.export_model", "main", "a checkpoint as a Hugging Face-style folder"),
    "convert-grove": ("command_line.convert_official_grove", "main", "check or convert a released GROVE checkpoint"),
    "convert-cotracker3": ("command_line.convert_official_cotracker3", "main",
                           "check or convert the released CoTracker3 checkpoint"),
    "convert-hub-jsonl": ("command_line.convert_to_hub_jsonl", "main", "annotations in the hub's JSONL layout"),
    "estimate-memory": ("command_line.estimate_memory", "main", "training memory per GPU of a config"),
    "estimate-inference-memory": ("command_line.estimate_inference_memory", "main",
                                  "inference memory of a config per precision"),
    "pretrain-judge-vision": ("command_line.pretrain_judge_vision", "main", "the toy judge's vision pretext"),
    "score-long-video": ("command_line.score_long_video", "main", "identity and linking scores of a long video"),
    "synthetic": ("command_line.synthetic_data", "synthetic_main", "generate and summarise the synthetic dataset"),
    "synthetic-pointing": ("command_line.synthetic_data", "synthetic_pointing_main",
                           "synthetic data in the pointing benchmarks' layout"),
    "synthetic-long": ("command_line.synthetic_data", "synthetic_long_main",
                       "one long synthetic video with its ground truth"),
    "clip-records": ("command_line.synthetic_data", "clip_records_main",
                     "the per-clip records of a long video's ground truth"),
    "live": ("live.command", "main", "grounded captions of a camera or a stream as it arrives"),
}
TRAINING_VERBS = ("fit", "validate", "test", "predict")


def usage() -> str:
    width = max(map(len, VERBS))
    lines = [f"  {verb:<{width}}  {what}" for verb, (_, _, what) in VERBS.items()]
    return "usage: grove VERB [options]   (grove VERB --help for a verb's options)\n\nverbs:\n" + "\n".join(lines)


def command(verb: str) -> Callable[[list[str]], Any]:
    """The function ``grove VERB`` runs, taking the arguments after the verb."""
    import core  # noqa: F401  (torchvision compatibility before the verb's module imports torchvision)

    module, name, _ = VERBS[verb]
    function = getattr(importlib.import_module(module), name)
    if verb in TRAINING_VERBS:
        return lambda argv: function([verb, *argv])
    return function


def main(argv: list[str] | None = None) -> int:
    """Run ``grove VERB ...``: the exit status a verb's command returns (a check that fails returns 1),
    else 0 (its errors exit on their own)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    verb, rest = argv[0], argv[1:]
    if verb not in VERBS:
        print(f"{usage()}\ngrove: error: unknown verb {verb!r} (choose from {', '.join(VERBS)})", file=sys.stderr)
        raise SystemExit(2)
    from core.user_errors import run_command

    result = run_command(command(verb), rest)
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


if __name__ == "__main__":
    sys.exit(main())
