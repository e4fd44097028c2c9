"""Every argparse command of the project, by how a user runs it, with the function that builds its
parser. ``python cli.py`` (LightningCLI: jsonargparse keys, not flags), ``grove demo`` (passes its
arguments to cli.py) and bench/ are not in it."""
from __future__ import annotations

from tests.fixtures.paths import ROOT

# command -> (module, main function, arguments before the command's own)
COMMANDS: dict[str, tuple[str, str, list[str]]] = {
    "grove synthetic": ("command_line.synthetic_data", "synthetic_main", []),
    "grove synthetic-pointing": ("command_line.synthetic_data", "synthetic_pointing_main", []),
    "grove synthetic-long": ("command_line.synthetic_data", "synthetic_long_main", []),
    "grove clip-records": ("command_line.synthetic_data", "clip_records_main", []),
    "grove webdemo serve": ("webdemo.__main__", "main", ["serve"]),
    "grove webdemo timeline": ("webdemo.__main__", "main", ["timeline"]),
    "grove agreement": ("agreement.__main__", "main", []),
    "grove glamm": ("glamm.commands", "main", []),
    "grove baselines": ("command_line.baselines", "main", []),
    "grove convert-cotracker3": ("command_line.convert_official_cotracker3", "main", []),
    "grove convert-grove": ("command_line.convert_official_grove", "main", []),
    "grove convert-hub-jsonl": ("command_line.convert_to_hub_jsonl", "main", []),
    "grove estimate-memory": ("command_line.estimate_memory", "main", []),
    "grove estimate-inference-memory": ("command_line.estimate_inference_memory", "main", []),
    "grove pretrain-judge-vision": ("command_line.pretrain_judge_vision", "main", []),
    "grove score-long-video": ("command_line.score_long_video", "main", []),
    "grove sweep": ("command_line.sweep", "main", []),
}
# The commands of the feature packages (annotation/, judge/), metrics/ and the export and pretraining
# scripts; tests/commands/test_bad_input.py gives each of them bad input too.
OTHER_PACKAGES_COMMANDS: dict[str, tuple[str, str, list[str]]] = {
    "grove annotate": ("annotation.__main__", "main", []),
    "grove judge": ("judge.application.commands", "main", []),
    "grove judge corrupt": ("judge.data.corruption.generator", "main", []),
    "grove evaluate": ("metrics.commands.evaluate", "main", []),
    "grove anet-entities": ("metrics.commands.anet_entities", "main", []),
    "grove vidstg": ("metrics.commands.vidstg", "main", []),
    "grove pointing": ("metrics.commands.pointing", "main", []),
    "grove mevis": ("metrics.commands.mevis", "main", []),
    "grove ground": ("command_line.ground", "main", []),
    "grove referring": ("command_line.referring", "main", []),
    "grove live": ("live.command", "main", []),
    "grove threshold-sweep": ("metrics.commands.threshold_sweep", "main", []),
    "grove pretrain-towers": ("lightning_modules.tower_pretraining", "main", []),
    "grove export": ("command_line.export_model", "main", []),
}
NOT_ARGPARSE = {"grove demo": "passes its arguments to cli.py fit/test (LightningCLI)"}


def grove_verbs() -> list[str]:
    """``grove VERB`` for every verb but the training ones (``python cli.py``'s LightningCLI)."""
    from command_line.grove import TRAINING_VERBS, VERBS

    return [f"grove {verb}" for verb in VERBS if verb not in TRAINING_VERBS]


def scripts_beside_setup() -> list[str]:
    """Python files under scripts/ (which holds only the Makefile's setup)."""
    return sorted(f"scripts/{p.name}" for p in (ROOT / "scripts").glob("*.py"))
