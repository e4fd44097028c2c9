"""The server's one temporary folder: samples, uploads (Gradio's cache) and a folder per request.

Everything the demo writes lives under it and it is removed when the server stops; while serving,
only the latest ``keep_runs`` request folders are kept, so a long-running server does not fill the disk.
"""
from __future__ import annotations

import itertools
import shutil
import tempfile
import threading
from pathlib import Path


class Workspace:
    def __init__(self, keep_runs: int = 16, parent: str | Path | None = None):
        self._tmp = tempfile.TemporaryDirectory(prefix="grove-webdemo-", dir=parent)
        self.root = Path(self._tmp.name)
        self.samples_dir = self.root / "samples"
        self.uploads_dir = self.root / "uploads"  # Gradio's cache (GRADIO_TEMP_DIR)
        self.runs_dir = self.root / "runs"
        for folder in (self.samples_dir, self.uploads_dir, self.runs_dir):
            folder.mkdir()
        self.keep_runs = max(1, keep_runs)
        self._counter = itertools.count()
        self._runs: list[Path] = []
        self._lock = threading.Lock()

    def new_run(self) -> Path:
        """A new empty folder for one request's outputs (the oldest beyond ``keep_runs`` are removed)."""
        with self._lock:
            folder = self.runs_dir / f"run{next(self._counter):05d}"
            folder.mkdir()
            self._runs.append(folder)
            while len(self._runs) > self.keep_runs:
                shutil.rmtree(self._runs.pop(0), ignore_errors=True)
            return folder

    def close(self) -> None:
        self._tmp.cleanup()

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
