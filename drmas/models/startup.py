"""What a process that runs models sets once, without the imports that only cost start-up time.

Every warm start, RL run, evaluation and card starts a fresh Python process, so what it
imports before its first step is paid some 80 times per default profile. transformers imports
two optional libraries at its own import whenever they are installed (pyserini installs both),
for features drmas never uses: scikit-learn in its generation package (a threshold of assisted
decoding) and SciPy in its loss package (the matching of object-detection losses), about 0.8
and 1 s of a model job's 9-10 s start-up on a 2-core CPU (docs/results.md, "Job start-up").
transformers caches the answer of each availability check, so `skip_unused` asks it again
while the library is hidden: transformers then skips the import for the rest of the process,
and the library stays importable for whoever needs it.

What stays, and why: torch itself (about 2 s), transformers' own import (its dependency
version checks and its distributed modules, which load `torch._dynamo`, about 3 s), and
`torch.use_deterministic_algorithms`, whose import of the compiler's configuration costs
nothing once transformers has loaded `torch._dynamo`.
"""

from __future__ import annotations

import sys


#: (module, transformers' cached availability check) of the optional libraries it would import
UNUSED = (("sklearn", "is_sklearn_available"), ("scipy", "is_scipy_available"))


def skip_unused() -> None:
    """Make transformers treat each library of `UNUSED` as absent (see the module's docstring)."""
    try:
        from transformers.utils import import_utils
    except ImportError:                          # no transformers: nothing to skip
        return
    for module, check_name in UNUSED:
        if module in sys.modules:                # already imported: nothing left to save
            continue
        check = getattr(import_utils, check_name, None)
        if check is None or not hasattr(check, "cache_info"):   # not a cached check: leave it
            continue
        check.cache_clear()                      # transformers' own import may have asked already
        sys.modules[module] = None               # find_spec answers None: "not installed"
        try:
            check()
        finally:
            del sys.modules[module]


def prepare_process(threads: int) -> None:
    """Threads, deterministic algorithms and a lean transformers, before any model is built."""
    import torch

    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    skip_unused()
