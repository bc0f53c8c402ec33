"""One registration mechanism for everything a config or a benchmark file names by string.

A `Registry` maps names to objects (classes or functions) that register themselves with a
decorator where they are defined. Built-ins are found by importing every module of the
registry's home packages the first time a name is looked up, so adding one is adding a
module (or, for a MAS, a folder under `drmas/mas/`): no list of modules to keep in sync.

The registries (see ARCHITECTURE.md, "How to add a MAS / a benchmark"):
- `MAS`: orchestra classes, one per folder of `drmas/mas/` (`mas:` in a benchmark file);
- `DEMONSTRATIONS`: warm-start demonstration builders, under the name of their MAS;
- `REWARDS`: outcome rewards `reward(answer_text, golds) -> float` (`reward:`);
- `GENERATORS` / `CORPORA`: seeded dataset and corpus generators of `kind: generated`
  datasets, modules of `drmas/data/generators/` (`generator:`);
- `ESTIMATORS`: advantage estimators (a method's `estimator:`), `drmas/algos/estimators.py`.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable, Generic, TypeVar

from drmas.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> object, filled by `@registry.register(name)` in the modules of `packages`."""

    def __init__(self, kind: str, packages: tuple[str, ...]):
        self.kind, self.packages = kind, packages
        self._entries: dict[str, T] = {}
        self._discovered = False

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: make the decorated object available under `name`."""
        def deco(obj: T) -> T:
            self.add(name, obj)
            return obj
        return deco

    def add(self, name: str, obj: T) -> None:
        known = self._entries.get(name)
        if known is not None and known is not obj:
            raise ValueError(f"{self.kind} {name!r} registered twice ({known!r} and {obj!r})")
        self._entries[name] = obj

    def get(self, name: str) -> T:
        """The object registered as `name`; a ConfigError naming the known ones otherwise."""
        if name not in self._entries:
            self.discover()
        if name not in self._entries:
            raise ConfigError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        return self._entries[name]

    def find(self, name: str) -> T | None:
        """Like `get`, but None for an unknown name (for optional entries)."""
        if name not in self._entries:
            self.discover()
        return self._entries.get(name)

    def names(self) -> list[str]:
        self.discover()
        return sorted(self._entries)

    def entries(self) -> dict[str, T]:
        """Every entry, in the order registered (for tables that list them in that order)."""
        self.discover()
        return dict(self._entries)

    def __contains__(self, name: str) -> bool:
        return self.find(name) is not None

    def discover(self) -> None:
        """Import every module and subpackage of the home packages (once), so that their
        decorators run. Modules whose name starts with "_" are private and skipped."""
        if self._discovered:
            return
        self._discovered = True
        for package in self.packages:
            home = importlib.import_module(package)    # a plain module registers on import
            for module in pkgutil.iter_modules(getattr(home, "__path__", [])):
                if not module.name.startswith("_"):
                    importlib.import_module(f"{package}.{module.name}")


MAS: Registry[type] = Registry("MAS", ("drmas.mas",))
DEMONSTRATIONS: Registry[Callable] = Registry("demonstration builder", ("drmas.mas",))
REWARDS: Registry[Callable] = Registry("reward", ("drmas.rewards",))
GENERATORS: Registry[Callable] = Registry("generator", ("drmas.data.generators",))
CORPORA: Registry[Callable] = Registry("corpus generator", ("drmas.data.generators",))
ESTIMATORS: Registry = Registry("advantage estimator", ("drmas.algos.estimators",))
