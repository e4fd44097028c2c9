"""The argument parser every command of the project builds: it knows which options are files the
command reads and which it writes, and refuses an output that is one of the inputs before the
command runs.

An option is declared ``role="input"`` or ``role="output"`` where it is added; after parsing, each
output is checked against every input of the same (sub)command with
:func:`core.output_files.refuse_input_as_output`, so a new command cannot forget the check (the
check lives in the parser, not in each command's body). Lists (``action="append"``, ``nargs``)
are checked item by item; a refusal exits with status 1 and a message naming both options.

Long options are spelled with hyphens (``--ckpt-path``). The one exception is LightningCLI's
``--ckpt_path`` (``grove fit|validate|test|predict``), which every command that declares
``--ckpt-path`` accepts as well, silently, so one checkpoint flag works with every verb. Only tokens
before ``--`` are read so.
"""
from __future__ import annotations

from core.output_files import OutputIsInputError, refuse_input_as_output

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

__all__ = ["CommandParser", "LIGHTNING_SPELLINGS", "ROLES"]

ROLES = ("input", "output")
# LightningCLI's spelling of an option -> the project's: both name the same option everywhere
LIGHTNING_SPELLINGS = {"--ckpt_path": "--ckpt-path"}


def _check_role(role: str | None) -> None:
    if role is not None and role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")


def _with_roles(group: Any) -> Any:
    """``group.add_argument`` taking ``role`` too (argument groups do not go through the parser's method)."""
    plain = group.add_argument

    def add_argument(*args: Any, role: str | None = None, **kwargs: Any) -> argparse.Action:
        _check_role(role)
        action = plain(*args, **kwargs)
        action.role = role
        return action

    group.add_argument = add_argument
    return group


class CommandParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose ``add_argument`` takes ``role="input" | "output"``.

    Sub-commands made with ``add_subparsers().add_parser`` are CommandParsers too, each checking
    its own options; argument groups and mutually exclusive groups take ``role`` as well.
    """

    def add_argument(self, *args: Any, role: str | None = None, **kwargs: Any) -> argparse.Action:
        _check_role(role)
        action = super().add_argument(*args, **kwargs)
        action.role = role
        return action

    def add_argument_group(self, *args: Any, **kwargs: Any) -> argparse._ArgumentGroup:
        return _with_roles(super().add_argument_group(*args, **kwargs))

    def add_mutually_exclusive_group(self, *args: Any, **kwargs: Any) -> argparse._MutuallyExclusiveGroup:
        return _with_roles(super().add_mutually_exclusive_group(*args, **kwargs))

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        args = self.lightning_spellings(sys.argv[1:] if args is None else list(args))
        parsed, extras = super().parse_known_args(args, namespace)
        try:
            self.refuse_outputs_over_inputs(parsed)
        except OutputIsInputError as err:
            raise SystemExit(f"{self.prog}: error: {err}") from None
        return parsed, extras

    def lightning_spellings(self, args: list[str]) -> list[str]:
        """``args`` with LightningCLI's spellings (:data:`LIGHTNING_SPELLINGS`) of the options this
        parser declares read as the hyphenated ones."""
        declared = set(self._option_string_actions)
        out = []
        for index, token in enumerate(args):
            if token == "--":
                return out + args[index:]
            name, equals, value = token.partition("=")
            new = LIGHTNING_SPELLINGS.get(name)
            out.append(new + equals + value if new in declared and name not in declared else token)
        return out

    def _paths(self, parsed: argparse.Namespace, role: str) -> list[tuple[str, Any]]:
        out = []
        for action in self._actions:
            if getattr(action, "role", None) != role:
                continue
            value = getattr(parsed, action.dest, None)
            name = action.option_strings[-1] if action.option_strings else action.dest
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if item is not None and item is not argparse.SUPPRESS:
                    out.append((name, item))
        return out

    def refuse_outputs_over_inputs(self, parsed: argparse.Namespace) -> None:
        """Raise :class:`OutputIsInputError` when an output option's path is (or lies inside) an input's."""
        inputs = self._paths(parsed, "input")
        for option, output in self._paths(parsed, "output"):
            # the input it *is* is named before a folder it lies inside
            for input_option, path in sorted(inputs, key=lambda item: not _same_file(output, item[1])):
                refuse_input_as_output(output, {input_option: path}, option)


def _same_file(path: Any, other: Any) -> bool:
    path, other = Path(path).expanduser(), Path(other).expanduser()
    try:
        return path.resolve() == other.resolve() or (path.exists() and other.exists() and path.samefile(other))
    except OSError:
        return False
