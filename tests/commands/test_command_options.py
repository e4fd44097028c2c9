"""Every command spells its long options with hyphens (``--ckpt-path``); LightningCLI's ``--ckpt_path``
names the same option, silently (core.command_parser)."""
from __future__ import annotations

from core.command_parser import CommandParser

import argparse
import importlib

import pytest

from tests.commands.command_list import (
    COMMANDS,
    NOT_ARGPARSE,
    OTHER_PACKAGES_COMMANDS,
    grove_verbs,
    scripts_beside_setup,
)


class _Built(Exception):
    def __init__(self, parser):
        self.parser = parser


def built_parser(monkeypatch, module: str, function: str, prefix: list[str]) -> argparse.ArgumentParser:
    """The parser a command's main builds, taken when it starts parsing (nothing of the command runs)."""
    def capture(self, args=None, namespace=None):
        raise _Built(self)

    monkeypatch.setattr(CommandParser, "parse_known_args", capture)
    with pytest.raises(_Built) as built:
        getattr(importlib.import_module(module), function)([*prefix, "--help"])
    return built.value.parser


def long_options(parser: argparse.ArgumentParser, prog: str = "") -> list[tuple[str, str]]:
    """(sub-command, option) for every long option of ``parser`` and its sub-commands."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += long_options(sub, f"{prog} {name}".strip())
        found += [(prog, o) for o in action.option_strings if o.startswith("--")]
    return found


@pytest.mark.parametrize("command", [*COMMANDS, *OTHER_PACKAGES_COMMANDS])
def test_long_options_are_hyphenated(command, monkeypatch):
    module, function, prefix = {**COMMANDS, **OTHER_PACKAGES_COMMANDS}[command]
    options = long_options(built_parser(monkeypatch, module, function, prefix))
    assert options, f"{command}: no long option found; is the parser a CommandParser?"
    underscored = [f"{sub} {o}".strip() for sub, o in options if "_" in o]
    assert not underscored, f"{command}: options spelled with underscores: {underscored}"


def test_the_command_list_covers_every_grove_verb():
    listed = [command.split()[:2] for command in [*COMMANDS, *OTHER_PACKAGES_COMMANDS, *NOT_ARGPARSE]]
    missing = [verb for verb in grove_verbs() if verb.split() not in listed]
    assert not missing, f"commands not in tests/commands/command_list.py: {missing}"


def test_every_command_is_a_grove_verb():
    assert scripts_beside_setup() == []
    assert all(command.startswith("grove ") for command in [*COMMANDS, *OTHER_PACKAGES_COMMANDS, *NOT_ARGPARSE])


def test_lightnings_ckpt_path_spelling_names_the_hyphenated_option_silently(capsys):
    parser = CommandParser(prog="tool")
    parser.add_argument("--ckpt-path")
    parser.add_argument("--keep_me")  # declared with an underscore: left as it is
    sub = parser.add_subparsers(dest="verb")
    run = sub.add_parser("run")
    run.add_argument("--max-new-tokens", type=int)
    args = parser.parse_args(["--ckpt_path=a.ckpt", "--keep_me", "1", "run", "--max-new-tokens", "4"])
    assert (args.ckpt_path, args.keep_me, args.max_new_tokens) == ("a.ckpt", "1", 4)
    assert parser.parse_args(["--ckpt_path", "b.ckpt"]).ckpt_path == "b.ckpt"
    assert capsys.readouterr().err == ""


def test_other_underscore_spellings_are_not_options(capsys):
    parser = CommandParser(prog="tool")
    parser.add_argument("--max-new-tokens", type=int)
    with pytest.raises(SystemExit):
        parser.parse_args(["--max_new_tokens", "4"])
    assert "unrecognized arguments: --max_new_tokens" in capsys.readouterr().err


def test_nothing_after_a_double_dash_is_rewritten(capsys):
    parser = CommandParser(prog="tool")
    parser.add_argument("--ckpt-path")
    parser.add_argument("rest", nargs="*")
    args, extras = parser.parse_known_args(["--model.init_args.max_new_tokens=8", "--", "--ckpt_path"])
    assert extras == ["--model.init_args.max_new_tokens=8"] and args.rest == ["--ckpt_path"]
    assert capsys.readouterr().err == ""
