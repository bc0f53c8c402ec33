"""The gradient-norm table (drmas/report/gradnorm.py): every method's pre-clip norms against
the median of GRPO's run of the same assignment, seed and agent, by hand."""

import numpy as np
import pandas as pd
import pytest

from drmas.report.gradnorm import COLUMNS, gradnorm_table, to_markdown
from drmas.report.runs import COLUMNS as RUN_COLUMNS


def frame(records):
    rows = []
    for method, seed, norms, absmax in records:
        for step, g in enumerate(norms):
            rows.append({**{c: np.nan for c in RUN_COLUMNS}, "suite": "math", "assignment": "shared",
                         "method": method, "seed": seed, "step": step, "agent": "solver",
                         "grad_norm": g, "adv_absmax": absmax})
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


RUNS = frame([
    ("grpo", 0, [0.2, 0.3, 0.4], 1.5),          # reference median 0.3
    ("grpo", 1, [1.0, 1.0, 1.0], 1.2),          # reference median 1.0
    ("grpo_2025", 0, [0.3, 300.0, 3.5], 1e5),   # 1000x and 11.7x seed 0's median
    ("grpo_2025", 1, [1.0, 2.0, float("nan")], 2.0),
    ("drmas", 0, [0.3, 0.3, 0.6], 1.9),
])


def test_values_against_the_same_seeds_grpo_median():
    t = gradnorm_table(RUNS, ["shared"])
    assert list(t.columns) == COLUMNS
    assert [k[1] for k in t.index] == ["grpo", "grpo_2025", "drmas"]
    row = t.loc[("shared", "grpo_2025", "solver")]
    assert row["median"] == pytest.approx((3.5 + 1.5) / 2)
    assert row["max"] == 300.0
    assert row["max / ref"] == pytest.approx(300.0 / 0.3)
    assert row["steps > 10x ref (%)"] == pytest.approx(100 * 2 / 5)    # the NaN step is not a step
    assert row["steps > 100x ref (%)"] == pytest.approx(100 * 1 / 5)
    assert row["runs > 100x ref"] == "1/2"
    assert row["max abs(A)"] == 1e5
    grpo = t.loc[("shared", "grpo", "solver")]
    assert grpo["max / ref"] == pytest.approx(max(0.4 / 0.3, 1.0)) and grpo["runs > 100x ref"] == "0/2"
    assert t.loc[("shared", "drmas", "solver")]["max / ref"] == pytest.approx(0.6 / 0.3)


def test_no_grpo_run_no_table_and_markdown_labels():
    assert gradnorm_table(RUNS[RUNS.method != "grpo"]) is None
    md = to_markdown(gradnorm_table(RUNS), "t", {"grpo_2025": "GRPO (upstream 2025)"})
    assert "| shared | GRPO (upstream 2025) | solver | 2.5 | 300 | 1e+03 | 40.0 | 20.0 | 1/2 | 1e+05 |" in md
