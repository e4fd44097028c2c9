"""Building an object named by a config's ``class_path``: resolve, check, then instantiate.

A config that names ``os.system`` (or any other callable) must not have it called with the
config's ``init_args``: the named object is first resolved, then checked to be a class deriving
from the base the config key expects (as jsonargparse does for LightningCLI's ``class_path``),
and only then instantiated. Every failure is a :class:`ClassPathError` naming the config key.
"""
from __future__ import annotations

import importlib
import inspect
from typing import Any, Mapping

__all__ = ["ClassPathError", "instantiate_class_path", "resolve_class_path"]


class ClassPathError(ValueError):
    """A ``class_path`` that names nothing importable, or no class of the expected kind; names the key."""


def resolve_class_path(class_path: Any, base: type, key: str) -> type:
    """The class ``class_path`` (``package.module.Class``) names, when it is a subclass of ``base``.

    Importing the module is the only code run; the named object is never called.
    """
    text = str(class_path or "")
    module_name, _, name = text.rpartition(".")
    if not module_name or not name:
        raise ClassPathError(f"{key}: {text!r} is not a class path (write package.module.ClassName)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ClassPathError(f"{key}: cannot import module {module_name!r} of {text} ({err})") from None
    target = getattr(module, name, None)
    if target is None:
        raise ClassPathError(f"{key}: module {module_name} has no {name!r}")
    if not inspect.isclass(target):
        raise ClassPathError(f"{key}: {text} is a {type(target).__name__}, not a class; give a subclass of "
                             f"{base.__module__}.{base.__qualname__}")
    if not issubclass(target, base):
        raise ClassPathError(f"{key}: {text} is not a subclass of {base.__module__}.{base.__qualname__}")
    if inspect.isabstract(target):
        missing = ", ".join(sorted(getattr(target, "__abstractmethods__", ())))
        raise ClassPathError(f"{key}: {text} is abstract (it does not implement {missing})")
    return target


def instantiate_class_path(spec: Mapping[str, Any], base: type, key: str, **extra: Any) -> Any:
    """``Class(**init_args, **extra)`` for a ``{class_path, init_args}`` entry, after
    :func:`resolve_class_path`; ``init_args`` must be a mapping."""
    cls = resolve_class_path(spec.get("class_path"), base, f"{key}.class_path")
    init_args = spec.get("init_args") or {}
    if not isinstance(init_args, Mapping):
        raise ClassPathError(f"{key}.init_args: a mapping of keyword arguments, got {type(init_args).__name__}")
    try:
        return cls(**dict(init_args), **extra)
    except TypeError as err:
        raise ClassPathError(f"{key}.init_args: {cls.__name__} does not take them ({err})") from None
