"""A diverged step is data: a NaN or infinite grad norm, reward or loss is counted in the
stability table's "non-finite steps" column and marked in the grad-norm figure, never
dropped; a grad norm that is not a number at all is refused, naming file:line."""

import json

import numpy as np
import pytest

from conftest import make_config, math_suite
from drmas.cli.inputs import check_run
from drmas.errors import DataError
from drmas.report import stability
from drmas.report.runs import load_runs, nonfinite
from drmas.report.tables import write_table
from runs import fake_run, scores_file

NORMS = {"solver": lambda s: 1.0, "verifier": lambda s: 1.0}
FACTORS = {"solver": 1.0, "verifier": 1.0}


def diverged(tmp_path, seed, bad: dict):
    """A fake run whose metrics.jsonl holds `bad` {step: grad_norm of the solver}."""
    run = fake_run(tmp_path / "runs", "shared", "grpo", seed, NORMS, FACTORS)
    path = f"{run}/metrics.jsonl"
    lines = [json.loads(line) for line in open(path)]
    for m in lines:
        if m["step"] in bad:
            m["agents"]["solver"]["grad_norm"] = bad[m["step"]]
    open(path, "w").write("".join(json.dumps(m) + "\n" for m in lines))   # NaN -> NaN, inf -> Infinity
    return run


def test_nonfinite_values():
    assert [nonfinite(v) for v in (float("nan"), float("inf"), "NaN", "-Infinity")] == [True] * 4
    assert [nonfinite(v) for v in (None, 1.0, 0, "x")] == [False, False, False, True]


def test_non_finite_steps_are_counted_not_dropped(tmp_path):
    runs = [diverged(tmp_path, 0, {4: float("nan"), 6: float("inf")}), diverged(tmp_path, 1, {5: "NaN"})]
    stats = stability.run_stats(load_runs(runs))
    solver = stats[stats.agent == "solver"].sort_values("seed")
    assert solver.nonfinite.tolist() == [2, 1]
    assert stats[stats.agent == "verifier"].nonfinite.tolist() == [0, 0]
    assert solver.spikes.tolist() == [0, 0]              # an infinity is no spike, and no median
    assert np.isfinite(solver.max_over_median).all()
    table = stability.stability_table(load_runs(runs), n_boot=200)
    assert table.loc[("shared", "grpo"), ("solver", "nonfinite")].mean == pytest.approx(1.5)


def test_the_stability_csv_has_the_non_finite_column(tmp_path):
    runs = [diverged(tmp_path, 0, {4: float("nan")})]
    files = [scores_file(tmp_path, "shared", "grpo", 0, {"a": [16, 4]})]
    write_table(make_config(tmp_path), math_suite(), files, str(tmp_path / "t" / "math"),
                run_dirs=runs, n_boot=200)
    csv = (tmp_path / "t" / "math_stability.csv").read_text().splitlines()
    header, row = csv[0].split(","), csv[1].split(",")
    assert row[header.index("solver non-finite steps")] == "1.0000"
    assert row[header.index("verifier non-finite steps")] == "0.0000"
    assert "non-finite steps = steps whose grad norm, reward or loss was NaN or infinite" in \
        (tmp_path / "t" / "math.md").read_text()


def test_the_grad_norm_figure_marks_them(tmp_path):
    import seaborn as sns

    from drmas.report.figures import mark_nonfinite

    df = load_runs([diverged(tmp_path, 0, {4: float("nan"), 6: float("inf")})])
    from drmas.report.style import METHOD_LABEL

    g = sns.FacetGrid(df.assign(method=df.method.map(lambda m: METHOD_LABEL.get(m, m))),
                      row="assignment", col="method")         # columns by label, as the figure
    assert mark_nonfinite(g, df, ["solver", "verifier"]) == 2


def test_a_grad_norm_that_is_no_number_is_refused_by_line(tmp_path):
    run = diverged(tmp_path, 0, {3: "abc"})
    with pytest.raises(DataError, match=r"metrics\.jsonl: line 3: agents\.solver\.grad_norm must be a number"):
        check_run(run)
    check_run(diverged(tmp_path / "ok", 0, {3: float("nan")}))
