"""Agent archetypes: ``agents/*.toml`` files, each with a prompt, a driver and a tool allowlist.

A broken file gives an error naming the file and the problem; the other agents still load.
"""

from __future__ import annotations

import logging
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from setup_agent.package_data import data_dir

__all__ = ["Archetype", "ArchetypeRegistry", "agents_dir", "load_archetypes"]

logger = logging.getLogger(__name__)


def agents_dir() -> Path:
    """The shipped agent definitions: the top-level ``agents/`` folder (inside this package in a wheel)."""
    return data_dir(__package__, "agents")


@dataclass(frozen=True)
class Archetype:
    id: str
    description: str
    prompt: str
    prompt_path: Path
    driver: str = "guided"
    model: str = ""
    tools: tuple[str, ...] = ()
    max_turns: int = 40
    max_seconds: float = 900.0
    source: Path | None = None


@dataclass
class ArchetypeRegistry:
    agents: dict[str, Archetype] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # file name -> problem

    def get(self, archetype_id: str) -> Archetype:
        try:
            return self.agents[archetype_id]
        except KeyError:
            known = ", ".join(sorted(self.agents)) or "none"
            raise KeyError(f"No agent archetype {archetype_id!r} (known: {known}).") from None


def _load_one(path: Path) -> Archetype:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    for key in ("id", "description", "prompt", "tools"):
        if key not in data:
            raise ValueError(f"missing required field {key!r}")
    if not isinstance(data["tools"], list) or not all(isinstance(t, str) for t in data["tools"]):
        raise ValueError("'tools' must be a list of tool names")
    prompt_path = (path.parent / data["prompt"]).resolve()
    if not prompt_path.is_file():
        raise ValueError(f"prompt file {data['prompt']!r} not found")
    return Archetype(
        id=str(data["id"]),
        description=str(data["description"]),
        prompt=prompt_path.read_text(encoding="utf-8"),
        prompt_path=prompt_path,
        driver=str(data.get("driver", "guided")),
        model=str(data.get("model", "")),
        tools=tuple(data["tools"]),
        max_turns=int(data.get("max_turns", 40)),
        max_seconds=float(data.get("max_seconds", 900)),
        source=path,
    )


def load_archetypes(directory: Path | None = None) -> ArchetypeRegistry:
    """Every archetype of ``directory`` (default: :func:`agents_dir`); a broken file is an error, not a stop."""
    registry = ArchetypeRegistry()
    for path in sorted((directory or agents_dir()).glob("*.toml")):
        try:
            agent = _load_one(path)
        except Exception as exc:  # noqa: BLE001 - reported per file
            registry.errors[path.name] = f"{path.name}: {exc}"
            logger.error("agent archetype %s could not be loaded: %s", path.name, exc)
            continue
        registry.agents[agent.id] = agent
    return registry
