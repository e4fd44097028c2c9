"""The house rules ``make lint`` keeps: bench/ and experiments/ run as the packages' users do (no
``sys.path`` edits: the editable install and ``PYTHONPATH`` find the packages), their long options are
spelled with hyphens as every command's are (``--ckpt-path``, not ``--ckpt_path``), and no file outside
tests/ holds more than 600 lines (a file holds one concept).

    python .ci/house_rules.py [ROOT]

Prints one ``file:line: what is wrong`` per finding and exits 1 when there is any.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SCRIPT_FOLDERS = ("bench", "experiments")
MAX_LINES = 600
# ``sys.path`` methods and assignments that change where imports come from
PATH_EDITS = ("insert", "append", "extend", "remove", "pop", "clear")


def _is_sys_path(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name)
            and node.value.id == "sys")


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    return []


def sys_path_edits(tree: ast.AST) -> list[int]:
    """Lines that edit ``sys.path`` (a method call on it, an assignment to it or to a slice of it)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in PATH_EDITS \
                and _is_sys_path(node.func.value):
            lines.append(node.lineno)
        for target in _targets(node):
            if _is_sys_path(target) or (isinstance(target, ast.Subscript) and _is_sys_path(target.value)):
                lines.append(node.lineno)
    return sorted(set(lines))


def underscored_options(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, option)`` for every ``add_argument("--foo_bar", ...)``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--") \
                        and "_" in arg.value:
                    found.append((node.lineno, arg.value))
    return found


def tracked_python_files(root: Path) -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=root, capture_output=True, text=True, check=True)
    return [root / name for name in listed.stdout.split()]


def findings(root: Path) -> list[str]:
    out = []
    for path in tracked_python_files(root):
        relative = path.relative_to(root)
        if not path.is_file():
            continue
        text = path.read_text()
        if relative.parts[0] != "tests" and text.count("\n") > MAX_LINES:
            out.append(f"{relative}:1: {text.count(chr(10))} lines (at most {MAX_LINES} outside tests/): "
                       "split it by concept")
        if relative.parts[0] not in SCRIPT_FOLDERS:
            continue
        tree = ast.parse(text, filename=str(relative))
        out += [f"{relative}:{line}: edits sys.path (the editable install and PYTHONPATH find the packages)"
                for line in sys_path_edits(tree)]
        out += [f"{relative}:{line}: option {option} is spelled with underscores (use {option.replace('_', '-')})"
                for line, option in underscored_options(tree)]
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0] if argv else Path(__file__).resolve().parent.parent).resolve()
    found = findings(root)
    for line in found:
        print(line)
    if not found:
        print(f"house rules kept: {', '.join(SCRIPT_FOLDERS)} edit no sys.path and spell options with hyphens; "
              f"no file outside tests/ over {MAX_LINES} lines")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
