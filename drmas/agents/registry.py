"""Name -> class registries for agents and orchestras, so configs and benchmark files can
name them and a new role is one decorated class away."""

from __future__ import annotations

from typing import Callable, TypeVar

from drmas.errors import ConfigError

T = TypeVar("T")

AGENTS: dict[str, type] = {}
ORCHESTRAS: dict[str, type] = {}


def _registrar(table: dict[str, type], name: str) -> Callable[[T], T]:
    def deco(cls: T) -> T:
        if name in table and table[name] is not cls:
            raise ValueError(f"{name!r} registered twice")
        table[name] = cls  # type: ignore[assignment]
        return cls
    return deco


def register(name: str):
    """Class decorator: make an Agent available under `name`."""
    return _registrar(AGENTS, name)


def register_orchestra(name: str):
    """Class decorator: make an orchestra (a MAS) available under `name`."""
    return _registrar(ORCHESTRAS, name)


def _lookup(table: dict[str, type], kind: str, name: str) -> type:
    _load_builtin()
    if name not in table:
        raise ConfigError(f"unknown {kind} {name!r}; known: {', '.join(sorted(table))}")
    return table[name]


def get_agent(name: str) -> type:
    return _lookup(AGENTS, "agent", name)


def get_orchestra(name: str) -> type:
    return _lookup(ORCHESTRAS, "MAS", name)


def _load_builtin() -> None:
    """Import the built-in agent modules so their decorators run."""
    import importlib

    for module in ("drmas.agents.math", "drmas.agents.single", "drmas.agents.search"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
