"""Where the project's top-level data folders are: ``ui/`` (the page) and ``agents/`` (the
agent archetypes).

They sit beside the packages in the checkout (the layout the design fixes). A wheel carries
them inside a package instead: the build maps ``ui/`` to ``app/ui`` and ``agents/`` to
``setup_agent/agent/agents`` (``[tool.hatch.build.targets.wheel.force-include]`` in
pyproject.toml). :func:`data_dir` answers for both, from where Python found the package.

Standard library only.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["data_dir"]


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"{package} is not an importable package")
    return Path(next(iter(spec.submodule_search_locations)))


def data_dir(package: str, name: str) -> Path:
    """The folder ``name`` inside ``package`` when installed from a wheel, else the checkout's
    top-level ``name`` (an editable install, or the source tree on ``sys.path``)."""
    installed = _package_dir(package) / name
    if installed.is_dir():
        return installed
    return _package_dir(package.partition(".")[0]).parent / name
