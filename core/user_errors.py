"""Bad input a user can fix, reported as one line: ``error: FILE[, key]: what is wrong, what to do``.

Every command's ``main`` runs inside :func:`run_command`: the error types the project raises for
input it cannot use (a missing file, a record or JSON file that is malformed, a class path that
names nothing, an output that is one of the inputs, ...) become that one line on stderr and exit
status 1; anything else is a bug and keeps its traceback. Usage errors stay argparse's (status 2).
"""
from __future__ import annotations

import json
from typing import Any, Callable

__all__ = ["INPUT_ERROR_NAMES", "UserInputError", "input_error_in", "input_error_types", "is_input_error",
           "run_command", "user_message"]


class UserInputError(ValueError):
    """Input a user can fix; the message names the file (and key or line) and what to do."""


# Input error types of the packages above core, by dotted name (core imports nothing above it); a
# subclass of one of them counts too.
INPUT_ERROR_NAMES = frozenset({
    "agreement.benchmarks.items.BenchmarkFormatError",
    "agreement.config.ConfigError",
    "annotation.config.ConfigError",
    "formats.predictions.DuplicateKeyError",
    "formats.record_errors.RecordError",
    "formats.safe_pickle.CorruptPickleError",
    "formats.safe_pickle.UnsafePickleError",
    "formats.video_reader.VideoDecodeError",
    "judge.data.readers.JudgeDataError",
    "metrics.functional.frame_boxes.GroundingInputError",
    "metrics.protocols.mevis.MevisFormatError",
    "metrics.protocols.pointing.PointingInputError",
    "webdemo.upload.UploadError",
    "yaml.error.YAMLError",
})


def input_error_types() -> tuple[type[BaseException], ...]:
    """The core exception types that mean "the input is wrong", not "the code is wrong"."""
    from core.class_paths import ClassPathError
    from core.folder_lock import FolderInUseError
    from core.json_file import JSONFileError
    from core.output_files import OutputIsInputError
    from core.output_paths import OutputFolderError
    from core.weights.files import WeightFileError
    from core.weights.pretrained_folder import PretrainedFolderError

    return (UserInputError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError,
            FileExistsError, json.JSONDecodeError, JSONFileError, ClassPathError, OutputIsInputError,
            WeightFileError, PretrainedFolderError, OutputFolderError, FolderInUseError)


def is_input_error(err: BaseException) -> bool:
    """Whether ``err`` reports input a user can fix (:func:`input_error_types`, :data:`INPUT_ERROR_NAMES`)."""
    if isinstance(err, input_error_types()):
        return True
    return any(f"{cls.__module__}.{cls.__qualname__}" in INPUT_ERROR_NAMES for cls in type(err).__mro__)


def user_message(err: BaseException) -> str:
    """One line for ``err``: the file it names first, then what is wrong."""
    if isinstance(err, json.JSONDecodeError):
        return f"not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})"
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        return f"{err.filename}: {err.strerror.lower()}"
    text = str(err) or type(err).__name__
    if isinstance(err, KeyError) and err.args:
        text = str(err.args[0])
    return " ".join(text.split())


def run_command(main: Callable[..., Any], argv: list[str] | None = None,
                extra_errors: tuple[type[BaseException], ...] = ()) -> Any:
    """``main(argv)``, with expected bad input turned into one ``error:`` line and exit status 1.

    ``extra_errors`` adds a command's own input error types (a feature package's config or
    benchmark format errors) to :func:`input_error_types`.
    """
    try:
        return main(argv)
    except Exception as err:
        found = input_error_in(err, tuple(extra_errors))
        if found is None:
            raise
        raise SystemExit(f"error: {user_message(found)}") from None


def input_error_in(err: BaseException, extra_errors: tuple[type[BaseException], ...] = ()) -> BaseException | None:
    """``err``, or the exception it was raised from, that reports bad input; None when there is none.

    Libraries that build objects from a config (jsonargparse for LightningCLI) re-raise a
    constructor's error as their own: the input error is found along ``__cause__``/``__context__``.
    """
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if is_input_error(err) or isinstance(err, extra_errors):
            return err
        err = err.__cause__ or err.__context__
    return None
