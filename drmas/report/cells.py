"""Table cells from the long score table (`tables.collect`): intervals over seeds and
problems for one row, and paired differences between two rows.

A row's frame holds one (assignment, method)'s scores: per seed, data_source, metric and
test problem a value in %. Each source becomes a seeds x problems matrix; a cell is the
crossed bootstrap over that matrix, the "Avg" cell the same over all sources as strata
(`intervals.crossed_bootstrap`). A difference pairs two rows by seed and problem, keeping
only the seeds and problems both have (`intervals.paired_bootstrap`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from drmas.errors import DataError
from drmas.report.intervals import Interval, crossed_bootstrap, paired_bootstrap

AVG = "Avg"


def sources_of(long: pd.DataFrame) -> list[str]:
    """The data_sources in first-seen order."""
    return list(dict.fromkeys(long["source"]))


def metrics_of(long: pd.DataFrame) -> list[str]:
    """avg@n before pass@n."""
    return sorted(set(long["metric"]), key=lambda m: m.startswith("pass"))


def matrices(frame: pd.DataFrame, sources: list[str], seeds=None, problems=None) -> list[np.ndarray]:
    """One seeds x problems matrix per source (seeds and problems sorted, or as given)."""
    out = []
    for source in sources:
        wide = frame[frame.source == source].pivot_table(index="seed", columns="problem",
                                                         values="value", aggfunc="mean")
        if seeds is not None:
            wide = wide.reindex(index=seeds, columns=problems[source])
        wide = wide.dropna(axis=1)
        if wide.shape[1] == 0:
            raise DataError(f"{source}: no problem scored under every seed "
                            f"{list(wide.index)}")
        out.append(wide.to_numpy())
    return out


def interval_cells(frame: pd.DataFrame, sources: list[str], metrics: list[str],
                   n_boot: int, statistic=crossed_bootstrap) -> dict[tuple[str, str], Interval]:
    """{(source or AVG, metric): interval} of one row: `statistic(matrix or matrices,
    n_boot=...)` per source and over all sources (default the mean's crossed bootstrap)."""
    cells = {}
    for metric in metrics:
        mats = matrices(frame[frame.metric == metric], sources)
        for source, mat in zip(sources, mats):
            cells[(source, metric)] = statistic(mat, n_boot=n_boot)
        cells[(AVG, metric)] = statistic(mats, n_boot=n_boot)
    return cells


def paired_cells(a: pd.DataFrame, b: pd.DataFrame, sources: list[str], metrics: list[str],
                 n_boot: int) -> dict[tuple[str, str], Interval] | None:
    """{(source or AVG, metric): interval of a - b}, paired by seed and problem; None when
    the two rows share no seed."""
    seeds = sorted(set(a.seed) & set(b.seed))
    if not seeds:
        return None
    cells = {}
    for metric in metrics:
        fa, fb = a[a.metric == metric], b[b.metric == metric]
        problems = {s: sorted(set(fa[fa.source == s].problem) & set(fb[fb.source == s].problem))
                    for s in sources}
        ma = matrices(fa, sources, seeds, problems)
        mb = matrices(fb, sources, seeds, problems)
        for source, x, y in zip(sources, ma, mb):
            cells[(source, metric)] = paired_bootstrap(x, y, n_boot=n_boot)
        cells[(AVG, metric)] = paired_bootstrap(ma, mb, n_boot=n_boot)
    return cells
