"""Math outcome reward: the last ``\\boxed{}`` of a response, checked for equivalence with gold.

Two tiers, because rewards sit on the training hot path and most answers are integers:

1. A cheap normalised string comparison (spacing, ``\\left``/``\\right``, ``\\dfrac``, degrees,
   dollars, thousands separators, ``\\text{}`` wrappers). If both sides are then plain decimal
   numbers they are compared exactly as fractions and the verdict is final; textual gold
   answers (``\\text{Evelyn}``, ``\\text{(C)}``) are compared as case-folded words.
2. Everything else goes to ``math_verify`` (parse + verify: fractions vs decimals, powers,
   equations such as ``x = 5``, intervals, tuples, sets, matrices, units).

Time limit — the choice made here. math_verify's own timeout uses ``signal.alarm``, which only
works in the main thread and cannot stop work that never returns to the interpreter: a model
answer like ``2^{2^{2^{40}}}`` makes sympy build a gigantic integer in C and the process is
killed for memory, whatever the alarm says. So tier 2 never runs in the caller's process. It
runs in a small worker process (one per concurrently calling thread, started on first use,
about a second), which arms its own ``setitimer`` alarm and caps its address space; the caller
waits ``timeout_s`` plus a short grace on the pipe and kills the worker if no verdict came back.
That bounds time and memory from any thread (trainer loop, thread pools, Ray actors) at the
cost of one pipe round trip (tens of µs) on the slow path only. A timeout or crash counts as
"not equivalent". Verdicts are cached per (pred, gold).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from fractions import Fraction

# Longest boxed answer sent to the slow checker; longer ones are junk in practice and only
# make sympy slow. They can still match gold by the string tier.
MAX_PRED_CHARS = 2000
# Address-space cap of a checker worker (sympy + antlr need a few hundred MiB).
WORKER_MEMORY_BYTES = 4 << 30
# Extra wait beyond timeout_s before the worker is killed (its own alarm should fire first).
KILL_GRACE_S = 1.0
# How long a worker may take to import math_verify and say it is ready.
STARTUP_TIMEOUT_S = 120.0


# --------------------------------------------------------------------------- extraction

_BARE_TOKEN = re.compile(r"[^\s$]+")
_FLAT_GROUP = re.compile(r"\{([^{}\\]*)\}")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\boxed ...`` / ``\\fbox{...}`` in ``text``.

    Braces are matched with nesting (escaped ``\\{``/``\\}`` do not count). A last box that is
    never closed (a truncated response) gives None rather than an earlier box: the final
    answer is what counts, and a cut-off one is no answer.
    """
    if not isinstance(text, str):
        return None
    end = len(text)
    while True:
        boxed, fbox = text.rfind("\\boxed", 0, end), text.rfind("\\fbox", 0, end)
        start = max(boxed, fbox)
        if start < 0:
            return None
        pos = start + (len("\\boxed") if start == boxed else len("\\fbox"))
        if pos < len(text) and text[pos].isalpha():  # e.g. \boxedanswer: another macro
            end = start
            continue
        return _box_content(text, pos)


def _box_content(text: str, pos: int) -> str | None:
    """Argument of a box command whose name ends at ``pos``."""
    n = len(text)
    while pos < n and text[pos] in " \t":
        pos += 1
    if pos >= n:
        return None
    if text[pos] != "{":  # "\boxed 5": one space-delimited token
        m = _BARE_TOKEN.match(text, pos)
        return m.group(0) if m else None
    m = _FLAT_GROUP.match(text, pos)  # fast path: no nested braces, no escapes
    if m:
        return m.group(1)
    depth, i = 0, pos
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[pos + 1 : i]
        i += 1
    return None


# --------------------------------------------------------------------------- tier 1: strings

# No pattern below may match one text in two ways (e.g. `\d+\.?\d*`, or `\s*\{?\s*`): a
# failing match then backtracks over every split, O(n^2) on a long run of digits or spaces.
# Each is written with one parse per text instead (same language, same matches).
_SUBS = [
    (re.compile(r"\\left(?![A-Za-z])|\\right(?![A-Za-z])|\\displaystyle"), ""),
    # spacing commands go, but a LaTeX row break \\ (as in "1 \\ 2") is kept whole
    (re.compile(r"(\\\\)|\\[!,;: ]|\\q?quad(?![A-Za-z])|~"), r"\1"),
    (re.compile(r"\\[dt]frac(?![A-Za-z])"), r"\\frac"),
    (re.compile(r"\^\s*(?:\{\s*)?\\circ\s*\}?|\\circ(?![A-Za-z])|\\?%|\\\$|\$"), ""),
    (re.compile(r"\{,\}"), ","),
    (re.compile(r"\s+"), ""),
]
_TEXT_WRAP = re.compile(r"\\(?:text|textbf|textrm|mbox|mathrm|mathbf)\{([^{}]*)\}")
_THOUSANDS = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d*)?")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")
_CHOICE = re.compile(r"\(([A-Za-z])\)")
_WORDS = re.compile(r"[A-Za-z]+")


def _normalize(s: str) -> str:
    """`_spelling(s)`, cached for answer-sized strings only: a cache of 65536 one-megabyte
    answers would hold gigabytes."""
    return _cached_spelling(s) if len(s) <= MAX_PRED_CHARS else _spelling(s)


def _spelling(s: str) -> str:
    """Canonical spelling for string comparison.

    Drops only what MATH-style answers treat as decoration: spacing, sizing, ``$``, ``\\%``,
    degree signs, a trailing period, thousands separators, a whole-answer ``\\text{}``.
    """
    s = s.strip()
    m = _TEXT_WRAP.fullmatch(s)
    if m:
        s = m.group(1)
    for pattern, repl in _SUBS:
        s = pattern.sub(repl, s)
    if s.endswith("."):
        s = s[:-1]
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "")
    m = _CHOICE.fullmatch(s)
    if m:
        s = m.group(1)
    return s


_cached_spelling = functools.lru_cache(maxsize=65536)(_spelling)


def _text_gold(gold: str) -> str | None:
    """Case-folded words if gold is a textual answer such as ``\\text{Evelyn}``, else None."""
    m = _TEXT_WRAP.fullmatch(gold.strip())
    if not m:
        return None
    inner = _normalize(m.group(1))
    return inner.casefold() if _WORDS.fullmatch(inner) else None


def _fast_verdict(pred: str, gold: str) -> bool | None:
    """True/False when strings settle it, None when a symbolic check is needed."""
    if pred.strip() == gold.strip():
        return True
    p, g = _normalize(pred), _normalize(gold)
    if p == g:
        return True
    if p.isdecimal() and g.isdecimal():  # the common case in training, so no Fraction
        return int(p) == int(g)
    if _NUMBER.fullmatch(p) and _NUMBER.fullmatch(g):
        return Fraction(p) == Fraction(g)
    words = _text_gold(gold)
    if words is not None:
        return p.casefold() == words
    return None


# --------------------------------------------------------------------------- tier 2: math_verify


@functools.lru_cache(maxsize=4096)
def _parse_gold(gold: str):
    from math_verify import parse

    return parse("$" + gold + "$", parsing_timeout=None)


@functools.lru_cache(maxsize=4096)
def _parse_pred(pred: str):
    from math_verify import parse

    return parse("\\boxed{" + pred + "}", parsing_timeout=None)


def _symbolic_equiv(pred: str, gold: str) -> bool:
    """math_verify's verdict, without any time limit (runs inside a worker)."""
    from math_verify import verify

    g, p = _parse_gold(gold), _parse_pred(pred)
    if not g or not p:
        return False
    return bool(verify(g, p, timeout_seconds=None))


class _Timeout(BaseException):
    """Raised by the worker's alarm; a BaseException so library `except Exception` lets it by."""


def _serve() -> None:
    """Worker loop: read ``[pred, gold, timeout_s]`` JSON lines, answer ``1``/``0`` lines."""
    import logging
    import resource

    logging.disable(logging.WARNING)  # math_verify warns that its own timeout is off
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = WORKER_MEMORY_BYTES
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        import math_verify  # noqa: F401  (import before saying ready)
    except Exception as exc:  # reported to the parent, which raises it
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return

    def on_alarm(signum, frame):
        raise _Timeout()

    signal.signal(signal.SIGALRM, on_alarm)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        verdict = False
        try:
            pred, gold, timeout_s = json.loads(line)
            signal.setitimer(signal.ITIMER_REAL, max(float(timeout_s), 0.01))
            try:
                verdict = _symbolic_equiv(pred, gold)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except (_Timeout, Exception):
            verdict = False
        sys.stdout.write("1\n" if verdict else "0\n")
        sys.stdout.flush()


class _Worker:
    """One checker process, used by one thread at a time."""

    def __init__(self) -> None:
        # Load this file by path, not through the `drmas` package: the worker then needs
        # neither the package on sys.path nor whatever the package __init__ imports.
        boot = (
            "import importlib.util as u, sys\n"
            f"s = u.spec_from_file_location('_drmas_math_worker', {os.path.abspath(__file__)!r})\n"
            "m = u.module_from_spec(s); s.loader.exec_module(m); m._serve()\n"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", boot],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            bufsize=0, start_new_session=True,
        )
        self._buf = b""
        hello = self._readline(STARTUP_TIMEOUT_S)
        msg = json.loads(hello) if hello else {"error": "no answer (crashed or too slow)"}
        if not msg.get("ready"):
            from drmas.errors import DrmasError

            self.kill()
            raise DrmasError(f"the math reward checker could not start: {msg.get('error')} "
                             "(is math-verify[antlr4_13_2] installed?)")

    def _readline(self, timeout_s: float) -> str | None:
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:  # EOF: the worker died
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def check(self, pred: str, gold: str, timeout_s: float) -> bool | None:
        """Verdict, or None if the worker timed out or died (it is then killed)."""
        try:
            self.proc.stdin.write((json.dumps([pred, gold, timeout_s]) + "\n").encode())
        except OSError:
            self.kill()
            return None
        line = self._readline(timeout_s + KILL_GRACE_S)
        if line is None:
            self.kill()
            return None
        return line == "1"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            stream.close()


class _Pool:
    """Idle workers; a calling thread takes one (or starts one) and gives it back."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.idle: list[_Worker] = []

    def check(self, pred: str, gold: str, timeout_s: float) -> bool:
        with self.lock:
            worker = self.idle.pop() if self.idle else None
        if worker is None:
            worker = _Worker()
        verdict = worker.check(pred, gold, timeout_s)
        if verdict is None:
            return False
        with self.lock:
            self.idle.append(worker)
        return verdict

    def close(self) -> None:
        if os.getpid() != self.pid:  # atexit in a forked child: these workers are the parent's
            return
        with self.lock:
            workers, self.idle = self.idle, []
        for w in workers:
            w.kill()


_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _get_pool() -> _Pool:
    """The process's pool; a forked child gets its own (pipes must not be shared)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = _Pool()
            atexit.register(_pool.close)
        return _pool


@functools.lru_cache(maxsize=65536)
def _slow_verdict(pred: str, gold: str, timeout_s: float) -> bool:
    return _get_pool().check(pred, gold, timeout_s)


# --------------------------------------------------------------------------- public API


def _as_text(value) -> str | None:
    """Strings as they are, numbers as text (a gold of 27 or 27.0 is fine), else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def is_equiv(pred: str, gold: str, timeout_s: float = 2.0) -> bool:
    """Whether answer ``pred`` equals ``gold`` (both bare, without ``\\boxed``).

    The symbolic check is bounded by ``timeout_s`` (plus a second of grace, and excluding a
    worker's one-off start-up); running out of time means False. Never raises on odd input.
    """
    pred, gold = _as_text(pred), _as_text(gold)
    if pred is None or gold is None or not gold.strip():
        return False
    try:
        verdict = _fast_verdict(pred, gold)
    except (ValueError, ZeroDivisionError):
        verdict = None
    if verdict is not None:
        return verdict
    if len(pred) > MAX_PRED_CHARS or not pred.strip():
        return False
    return _slow_verdict(pred, gold, float(timeout_s))


def score(response: str, gold: str) -> float:
    """1.0 iff the last ``\\boxed{}`` of ``response`` is equivalent to ``gold``, else 0.0."""
    pred = last_boxed(response)
    if pred is None:
        return 0.0
    return 1.0 if is_equiv(pred, gold) else 0.0
