"""Evaluation metrics: avg@k and the unbiased pass@k, per data_source and overall.

The paper samples n = 16 answers per problem and reports avg@16 (mean success rate) and
pass@16 (share of problems with a success). pass@k uses the unbiased estimator
1 - C(n-c, k)/C(n, k), so runs with n > k are comparable; at k = n it is exactly
"any success".
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

import pandas as pd

from drmas.errors import DataError

SUCCESS_THRESHOLD = 0.5


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c successes: 1 - C(n-c, k) / C(n, k).

    Computed as 1 - prod_{i=n-c+1..n} (1 - k/i), which never forms huge binomials.
    """
    for name, v in (("n", n), ("c", c), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise ValueError(f"pass_at_k: {name} must be an int, got {v!r}")
    if n < 1 or not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs n >= 1, 0 <= c <= n, 1 <= k <= n; got n={n} c={c} k={k}")
    n, c, k = int(n), int(c), int(k)
    if c == 0:
        return 0.0
    if n - c < k:  # every k-subset holds a success (includes k == n)
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def avg_at_k(scores_per_sample: Iterable[float], threshold: float = SUCCESS_THRESHOLD) -> float:
    """Mean success over one problem's samples; a sample succeeds when score >= threshold."""
    scores = list(scores_per_sample)
    if not scores:
        raise ValueError("avg_at_k needs at least one sample")
    return sum(float(s) >= threshold for s in scores) / len(scores)


def aggregate(samples: pd.DataFrame, k: int, threshold: float = SUCCESS_THRESHOLD) -> dict:
    """avg@k and pass@k per data_source, overall and macro, from one row per sample.

    ``samples`` needs columns ``data_source, problem_id`` and either a boolean ``success``
    column (used as is) or a ``score`` column (success = score >= threshold; rewards here
    are 1/0 minus small format penalties, so 0.5 separates them). A problem is
    (data_source, problem_id); avg@k is its mean success over all its samples (n == k in
    the paper) and each problem needs n >= k samples.

    ``overall`` weights every problem once across sources; ``macro`` is the plain mean of
    the per-source numbers (the "Avg" column of the paper's tables). ``per_problem`` keeps
    each problem's ``[n, c]`` (samples, successes) per source: the tables' confidence
    intervals resample problems (`problem_values` turns them back into avg@k / pass@k).
    """
    missing = {"data_source", "problem_id"} - set(samples.columns)
    if "success" not in samples.columns and "score" not in samples.columns:
        missing.add("score")
    if missing:
        raise DataError(f"samples table lacks column(s): {', '.join(sorted(missing))}")
    if samples.empty:
        raise DataError("samples table is empty")
    success = samples["success"].astype(bool) if "success" in samples.columns else samples["score"] >= threshold
    per_problem = (
        success.groupby([samples["data_source"], samples["problem_id"]]).agg(["size", "sum"]).reset_index()
    )
    short = per_problem[per_problem["size"] < k]
    if len(short):
        row = short.iloc[0]
        raise DataError(
            f"{len(short)} problem(s) have fewer than k={k} samples, "
            f"e.g. {row['data_source']}/{row['problem_id']} with {row['size']}"
        )
    avg_key, pass_key = f"avg@{k}", f"pass@{k}"
    per_problem[avg_key] = per_problem["sum"] / per_problem["size"]
    per_problem[pass_key] = [
        pass_at_k(int(n), int(c), k) for n, c in zip(per_problem["size"], per_problem["sum"])
    ]

    def summary(frame: pd.DataFrame) -> dict:
        return {
            avg_key: float(frame[avg_key].mean()),
            pass_key: float(frame[pass_key].mean()),
            "n_problems": int(len(frame)),
        }

    per_source = {str(src): summary(frame) for src, frame in per_problem.groupby("data_source")}
    macro = {
        avg_key: sum(v[avg_key] for v in per_source.values()) / len(per_source),
        pass_key: sum(v[pass_key] for v in per_source.values()) / len(per_source),
        "n_sources": len(per_source),
    }
    counts = {str(src): {str(pid): [int(n), int(c)] for pid, n, c in
                         zip(frame["problem_id"], frame["size"], frame["sum"])}
              for src, frame in per_problem.groupby("data_source")}
    return {"per_source": per_source, "overall": summary(per_problem), "macro": macro,
            "per_problem": counts}


def problem_values(counts: dict[str, list[int]], k: int) -> dict[str, dict[str, float]]:
    """{metric: {problem_id: value}} from one source's ``per_problem`` counts: avg@k = c/n
    and the unbiased pass@k, exactly as `aggregate` computed the source's means."""
    return {f"avg@{k}": {pid: c / n for pid, (n, c) in counts.items()},
            f"pass@{k}": {pid: pass_at_k(n, c, k) for pid, (n, c) in counts.items()}}
