"""Every argparse command of the project, by how a user runs it, with the function that builds its
parser. ``python cli.py`` (LightningCLI: jsonargparse keys, not flags), scripts/demo.py (passes its
arguments to cli.py) and bench/ are not in it."""
from __future__ import annotations

from tests.fixtures.paths import ROOT

# command -> (module, main function, arguments before the command's own)
COMMANDS: dict[str, tuple[str, str, list[str]]] = {
    "grove synthetic": ("command_line.synthetic_data", "synthetic_main", []),
    "grove synthetic-pointing": ("command_line.synthetic_data", "synthetic_pointing_main", []),
    "grove synthetic-long": ("command_line.synthetic_data", "synthetic_long_main", []),
    "grove clip-records": ("command_line.synthetic_data", "clip_records_main", []),
    "python -m webdemo serve": ("webdemo.__main__", "main", ["serve"]),
    "python -m webdemo timeline": ("webdemo.__main__", "main", ["timeline"]),
    "python -m agreement": ("agreement.__main__", "main", []),
    "python scripts/glamm.py": ("glamm.commands", "main", []),
    "python scripts/baselines.py": ("scripts.baselines", "main", []),
    "python scripts/convert_official_cotracker3.py": ("scripts.convert_official_cotracker3", "main", []),
    "python scripts/convert_official_grove.py": ("scripts.convert_official_grove", "main", []),
    "python scripts/convert_to_hub_jsonl.py": ("scripts.convert_to_hub_jsonl", "main", []),
    "python scripts/estimate_memory.py": ("scripts.estimate_memory", "main", []),
    "python scripts/estimate_inference_memory.py": ("scripts.estimate_inference_memory", "main", []),
    "python scripts/pretrain_judge_vision.py": ("scripts.pretrain_judge_vision", "main", []),
    "python scripts/score_long_video.py": ("scripts.score_long_video", "main", []),
    "python scripts/sweep.py": ("scripts.sweep", "main", []),
}
# The commands of the feature packages (annotation/, judge/), metrics/ and the export and pretraining
# scripts; tests/commands/test_bad_input.py gives each of them bad input too.
OTHER_PACKAGES_COMMANDS: dict[str, tuple[str, str, list[str]]] = {
    "python -m annotation": ("annotation.__main__", "main", []),
    "python -m judge": ("judge.application.commands", "main", []),
    "python -m judge corrupt": ("judge.data.corruption.generator", "main", []),
    "grove evaluate": ("metrics.commands.evaluate", "main", []),
    "grove anet-entities": ("metrics.commands.anet_entities", "main", []),
    "grove vidstg": ("metrics.commands.vidstg", "main", []),
    "grove pointing": ("metrics.commands.pointing", "main", []),
    "grove mevis": ("metrics.commands.mevis", "main", []),
    "python scripts/threshold_sweep.py": ("metrics.commands.threshold_sweep", "main", []),
    "python scripts/pretrain_towers.py": ("lightning_modules.tower_pretraining", "main", []),
    "python scripts/export_model.py": ("scripts.export_model", "main", []),
}
NOT_ARGPARSE = {"scripts/demo.py": "passes its arguments to cli.py fit/test (LightningCLI)"}


def script_files() -> list[str]:
    return sorted(f"scripts/{p.name}" for p in (ROOT / "scripts").glob("*.py"))


def package_entry_points() -> list[str]:
    return sorted(p.parent.name for p in ROOT.glob("*/__main__.py"))
