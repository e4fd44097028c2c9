"""``grove annotate run``: plan the clips, skip those already done, run an engine, write records and report."""
from __future__ import annotations

from core.folder_lock import hold_folder
from core.json_file import read_json
from core.output_files import refuse_input_as_output, write_json_atomic
from core.output_folder import claim_output_folder

import json
import logging
from pathlib import Path

from annotation.clips import SkippedClip, clips_from_records, clips_from_timestamps, clips_from_videos
from annotation.outcomes import Rejection
from annotation.output import OutputFolder
from annotation.report import RunReport
from formats.records import GroundedRecord, read_records

log = logging.getLogger(__name__)
FRAME_STAGES = ("decode", "stage1", "stage3_tracking")  # timed per planned clip; the others per readable clip


def plan_clips(config: dict, videos: str | Path, truth: str | Path | None, limit: int | None = None):
    """The clips to annotate (ground-truth clips when ``truth`` is given) and the videos skipped while planning."""
    if truth is not None:
        specs, skipped = clips_from_records(read_records(truth)), []
    elif config["clips"].get("timestamps") is not None:
        specs, skipped = clips_from_timestamps(videos, config["clips"]["timestamps"], config["clips"]["min_seconds"],
                                               bool(config["clips"].get("clamp_spans")))
    else:
        specs, skipped = clips_from_videos(videos, config["clips"]["seconds"], config["clips"]["min_seconds"])
    keys = [s.key for s in specs]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"clip key '{dup}' appears twice in {'--truth ' + str(truth) if truth else '--videos'}")
    if limit is not None:
        if int(limit) < 0:
            raise ValueError(f"--limit must be >= 0, got {limit}")
        specs = specs[:int(limit)]
    return specs, skipped


def make_engine(name: str, config: dict, videos, truth, progress: bool, ray_address: str | None = None):
    if name == "local":
        from annotation.engines.local import LocalEngine

        return LocalEngine(config, videos, truth, progress)
    if name == "ray":
        from annotation.engines.ray import RayEngine

        return RayEngine(config, videos, truth, progress, address=ray_address)
    raise ValueError(f"--engine must be 'local' or 'ray', got {name!r}")


RUN_INPUTS = "run_inputs.json"


def run_inputs(config: dict, videos: str | Path, truth: str | Path | None) -> dict:
    """What a clip key of an output folder stands for: the videos, the ground truth and the
    ``clips`` section that cut them. A re-run resumes only with the same, so an accepted record is
    never taken for a clip it is not of; the stages' settings may change between runs (a re-run
    with ``--retry-rejected`` and more retries is how rejected clips are redone)."""
    return {"videos": str(Path(videos).resolve()), "truth": None if truth is None else str(Path(truth).resolve()),
            "clips": dict(config.get("clips") or {})}


def _flat(value, prefix: str = "") -> dict:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}{key}.").items()}
    return {prefix[:-1]: value}


def check_run_inputs(out: str | Path, config: dict, videos: str | Path, truth: str | Path | None) -> None:
    """Record the run's inputs in ``OUT/run_inputs.json``; refuse to resume a folder made from others
    (its clips would be passed off as annotations of these), naming the settings that differ."""
    path = Path(out) / RUN_INPUTS
    inputs = json.loads(json.dumps(run_inputs(config, videos, truth), default=str))
    if path.is_file():
        before = read_json(path)
        old, new = _flat(before), _flat(inputs)
        changed = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        if changed:
            shown = "; ".join(f"{k}: {old.get(k)!r} then, {new.get(k)!r} now" for k in changed[:5])
            raise ValueError(f"--out {out} holds annotations made from other inputs ({shown}"
                             f"{' ...' if len(changed) > 5 else ''}): annotate into another --out, or delete "
                             f"{path} to resume anyway")
        return
    write_json_atomic(path, inputs)


def run_annotation(config: dict, config_files: list[str], videos: str | Path, out: str | Path,
                   truth: str | Path | None = None, engine: str = "local", limit: int | None = None,
                   retry_rejected: bool = False, progress: bool = True, ray_address: str | None = None) -> dict:
    """Annotate the clips not yet done under ``out``; returns the report (also ``out/report.json``)."""
    refuse_input_as_output(out, {"--videos": videos, "--truth": truth})
    specs, skipped = plan_clips(config, videos, truth, limit)  # before any folder is made: a bad input leaves none
    with hold_folder(out, "grove annotate run"):  # one run at a time: they write the same records
        claim_output_folder(out, "grove annotate run", own_files=(RUN_INPUTS,), overwrite_option=None)
        check_run_inputs(out, config, videos, truth)
        return _run(config, config_files, videos, out, truth, engine, specs, skipped, retry_rejected, progress,
                    ray_address)


def _run(config, config_files, videos, out, truth, engine, specs, skipped, retry_rejected, progress,
         ray_address) -> dict:
    output = OutputFolder(out)
    done = output.done_keys(retry_rejected)
    todo = [s for s in specs if output.file_stem(s.key) not in done]
    report = RunReport(engine, config_files, planned=len(specs), already_done=len(specs) - len(todo))
    report.skipped.extend(skipped)
    if todo:
        runner = make_engine(engine, config, videos, truth, progress, ray_address)
        for results, timings, clips, readable in runner.process(todo):
            for result in results:
                if isinstance(result, GroundedRecord):
                    output.write_record(result)
                    report.accepted += 1
                elif isinstance(result, Rejection):
                    output.write_rejection(result)
                    report.rejected.append(result)
                elif isinstance(result, SkippedClip):
                    log.warning("skipped %s: %s", result.key, result.reason)
                    report.skipped.append(result)
            report.add_timings({k: v for k, v in timings.items() if k in FRAME_STAGES}, clips)
            report.add_timings({k: v for k, v in timings.items() if k not in FRAME_STAGES}, readable)
            report.write(output.root / "report.json", _totals(output))
    output.close()
    return report.write(output.root / "report.json", _totals(output))


def _totals(output: OutputFolder) -> dict:
    return {"accepted": len(output.accepted_keys()), "rejected": len(output.rejected_reasons())}
