"""One holder of an output folder at any time, a dead holder's lock free again, messages naming the holder."""
from core.folder_lock import FolderInUseError, hold_file, hold_folder

import json
import multiprocessing
import os
import subprocess
import sys
import time

import pytest


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _try_hold(folder, barrier, inside, most, lock, results):
    barrier.wait()
    try:
        with hold_folder(folder, "contender"):
            with lock:
                inside.value += 1
                most.value = max(most.value, inside.value)
            time.sleep(0.05)
            with lock:
                inside.value -= 1
        results.put("held")
    except FolderInUseError:
        results.put("refused")
    except BaseException as err:  # noqa: BLE001 - reported to the parent
        results.put(f"{type(err).__name__}: {err}")


@pytest.mark.parametrize("stale", ["flocked", "created"])
def test_runs_started_together_on_a_stale_lock_never_hold_the_folder_at_once(tmp_path, stale):
    context = multiprocessing.get_context("fork")
    processes, rounds = 4, 15
    inside, most, lock = context.Value("i", 0), context.Value("i", 0), context.Lock()
    for round_ in range(rounds):
        folder = tmp_path / f"out{round_}"
        folder.mkdir()
        record = {"pid": _dead_pid(), "command": "killed run"}
        if stale == "flocked":
            record["flock"] = True
        (folder / ".lock").write_text(json.dumps(record))  # left behind by a killed run
        barrier, results = context.Barrier(processes), context.Queue()
        workers = [context.Process(target=_try_hold, args=(folder, barrier, inside, most, lock, results))
                   for _ in range(processes)]
        for worker in workers:
            worker.start()
        outcomes = [results.get(timeout=60) for _ in workers]
        for worker in workers:
            worker.join(timeout=30)
        assert set(outcomes) <= {"held", "refused"} and "held" in outcomes, outcomes
        assert most.value == 1, (round_, most.value)
        assert not (folder / ".lock").exists()  # the last holder removed it


def test_a_killed_holder_frees_the_folder_and_a_live_one_is_named(tmp_path):
    code = (f"from core.folder_lock import hold_folder\nimport time\n"
            f"with hold_folder({str(tmp_path)!r}, 'sleeper'):\n    print('in', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert holder.stdout.readline().strip() == "in"
        with pytest.raises(FolderInUseError, match=rf"{tmp_path} is in use by another run \(process {holder.pid}, "
                                                   rf"sleeper, .*lock file {tmp_path}/.lock\)"):
            with hold_folder(tmp_path):
                pass
    finally:
        holder.kill()
        holder.wait()
    assert (tmp_path / ".lock").exists()  # a kill leaves the file, not the lock
    with hold_folder(tmp_path, "next") as lock:
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        with pytest.raises(FolderInUseError):  # held: refused in this process too
            with hold_folder(tmp_path):
                pass
    assert not lock.exists()


def test_an_appended_file_is_held_beside_it(tmp_path):
    out = tmp_path / "scores.jsonl"
    with hold_file(out, "judge score") as lock:
        assert lock == tmp_path / ".scores.jsonl.lock"
        with pytest.raises(FolderInUseError, match=r"scores.jsonl is in use by another run"):
            with hold_file(out):
                pass
    assert not lock.exists()


def test_an_appended_file_that_is_a_link_is_refused(tmp_path):
    from core.output_folder import OutputFolderError

    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text("")
    (tmp_path / "scores.jsonl").symlink_to(elsewhere)
    with pytest.raises(OutputFolderError, match=r"scores.jsonl is a symbolic link"):
        with hold_file(tmp_path / "scores.jsonl"):
            pass
