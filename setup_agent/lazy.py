"""Lazy re-exports for package ``__init__``s: ``from setup_agent.store import Store`` loads
``setup_agent/store/database.py`` on first use, so importing a package costs one small file
(the stdio face answers ``initialize`` before the rest of the core has loaded).

Standard library only; every package of the project may use it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, where: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each public name is read from its module
    (``where[name]``, relative to the package) the first time it is asked for."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
