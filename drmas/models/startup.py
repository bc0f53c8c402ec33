"""What a process that runs models sets once, without the imports that only cost start-up time.

Every warm start, RL run, evaluation and card starts a fresh Python process, so what it
imports before its first step is paid some 80 times per default profile. transformers'
generation package imports scikit-learn at its own import whenever scikit-learn is installed
(pyserini installs it), for a threshold of assisted decoding that drmas never uses: about 0.8 s
of a model job's 7-8 s start-up on a 2-core CPU (docs/results.md, "Job start-up").
transformers caches the answer of its availability check, so `skip_sklearn` asks it once while
scikit-learn is hidden: transformers then skips the import for the rest of the process, and
scikit-learn stays importable for whoever needs it.

What stays, and why: torch itself (about 2 s), transformers' own import (its dependency
version checks and its distributed modules, which load `torch._dynamo`, about 3 s), and
`torch.use_deterministic_algorithms`, whose import of the compiler's configuration costs
nothing once transformers has loaded `torch._dynamo`.
"""

from __future__ import annotations

import sys


def skip_sklearn() -> None:
    """Make transformers treat scikit-learn as absent (see the module's docstring)."""
    if "sklearn" in sys.modules:                 # already imported: nothing left to save
        return
    try:
        from transformers.utils import import_utils
    except ImportError:                          # no transformers: nothing to skip
        return
    check = getattr(import_utils, "is_sklearn_available", None)
    if check is None or not hasattr(check, "cache_info"):   # not a cached check: leave it
        return
    sys.modules["sklearn"] = None                # find_spec answers None: "not installed"
    try:
        check()
    finally:
        del sys.modules["sklearn"]


def prepare_process(threads: int) -> None:
    """Threads, deterministic algorithms and a lean transformers, before any model is built."""
    import torch

    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    skip_sklearn()
