"""Tables and figures from hand-made scores and metrics."""

import json

import pandas as pd

from conftest import make_config, math_suite
from drmas.report.figures import load_runs, theory_table, write_figures
from drmas.report.tables import write_table


def scores_file(tmp_path, assignment, method, seed, per_source):
    n = 16
    macro = {f"avg@{n}": sum(a for a, _ in per_source.values()) / len(per_source),
             f"pass@{n}": sum(p for _, p in per_source.values()) / len(per_source)}
    path = tmp_path / f"{assignment}_{method}_{seed}.json"
    path.write_text(json.dumps({
        "n": n, "meta": {"suite": "math", "assignment": assignment, "method": method, "seed": seed},
        "per_source": {s: {f"avg@{n}": a, f"pass@{n}": p} for s, (a, p) in per_source.items()},
        "macro": macro, "overall": macro}))
    return str(path)


def test_table_layout_and_seed_average(tmp_path):
    cfg = make_config(tmp_path)
    files = [scores_file(tmp_path, "nonshared", "drmas", 0, {"a": (0.5, 1.0), "b": (0.3, 0.5)}),
             scores_file(tmp_path, "nonshared", "drmas", 1, {"a": (0.7, 1.0), "b": (0.1, 0.5)}),
             scores_file(tmp_path, "shared", "grpo", 0, {"a": (0.2, 0.5), "b": (0.2, 0.5)}),
             scores_file(tmp_path, "shared", "base", 0, {"a": (0.1, 0.5), "b": (0.0, 0.0)})]
    wide = write_table(cfg, math_suite(), files, str(tmp_path / "tables" / "math"))
    # config order of assignments, paper order of methods
    assert list(wide.index) == [("shared", "Base (warm start)"), ("shared", "GRPO"), ("nonshared", "Dr. MAS")]
    row = wide.loc[("nonshared", "Dr. MAS")]
    assert row[("a", "avg@16")] == 60.0 and row[("b", "avg@16")] == 20.0      # mean of 2 seeds, in %
    assert row[("Avg", "avg@16")] == 40.0 and row[("", "seeds")] == 2
    csv = pd.read_csv(tmp_path / "tables" / "math.csv")
    assert list(csv.columns[2:]) == ["a avg@16", "a pass@16", "b avg@16", "b pass@16",
                                     "Avg avg@16", "Avg pass@16", "seeds"]
    md = (tmp_path / "tables" / "math.md").read_text()
    assert "| nonshared | Dr. MAS | 60.0 | 100.0 | 20.0 | 50.0 | 40.0 | 75.0 | 2 |" in md
    assert "\\begin{tabular}" in (tmp_path / "tables" / "math.tex").read_text()


def test_behaviour_table_when_scores_carry_routing(tmp_path):
    cfg = make_config(tmp_path)
    files = []
    for method, searched in (("base", 0.5), ("drmas", 0.9)):
        path = scores_file(tmp_path, "shared", method, 0, {"a": (0.5, 1.0)})
        s = json.loads(open(path).read())
        s["behaviour"] = {"overall": {}, "per_source": {"a": {"searched_before_answer": searched,
                                                              "searches": 2 * searched}}}
        open(path, "w").write(json.dumps(s))
        files.append(path)
    write_table(cfg, math_suite(), files, str(tmp_path / "tables" / "search"))
    md = (tmp_path / "tables" / "search.md").read_text()
    assert "behaviour on the test problems" in md
    assert "| a searched before answering (%) | a searches / episode |" in md.replace("| assignment | method ", "")
    assert "| shared | Dr. MAS | 90.0 | 1.8 |" in md and "| shared | Base (warm start) | 50.0 | 1.0 |" in md
    csv = pd.read_csv(tmp_path / "tables" / "search_behaviour.csv")
    assert list(csv["a searches / episode"]) == [1.0, 1.8]
    # scores without behaviour: no routing section, no extra file
    write_table(cfg, math_suite(), files[:0] + [scores_file(tmp_path, "shared", "grpo", 0, {"a": (0.5, 1.0)})],
                str(tmp_path / "tables" / "plain"))
    assert "behaviour" not in (tmp_path / "tables" / "plain.md").read_text()
    assert not (tmp_path / "tables" / "plain_behaviour.csv").exists()


def fake_run(root, assignment, method, norms, factor):
    run = root / assignment / method
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(f"assignment: {assignment}\nmethod: {method}\nseed: 0\n")
    with open(run / "metrics.jsonl", "w") as f:
        for step, (gs, gv) in enumerate(norms, 1):
            f.write(json.dumps({"step": step, "team_reward": {"mean": 0.1 * step},
                                "agents": {"solver": {"grad_norm": gs, "reward": {"mean": 0.5}},
                                           "verifier": {"grad_norm": gv, "reward": {"mean": 0.5}}},
                                "theory": {"agents": {"solver": {"factor": factor[0]},
                                                      "verifier": {"factor": factor[1]}}}}) + "\n")
    return str(run)


def test_theory_table_and_figures(tmp_path):
    runs = [fake_run(tmp_path, "nonshared", "grpo", [(2.0, 1.0), (4.0, 1.0)], (3.0, 1.0)),
            fake_run(tmp_path, "nonshared", "drmas", [(1.0, 1.0), (2.0, 1.0)], (2.0, 2.0))]
    both = theory_table(load_runs(runs)).set_index("agent")
    assert both.loc["solver", "measured_ratio"] == 2.0          # mean 3.0 / mean 1.5
    assert both.loc["solver", "predicted"] == 3.0                # from the GRPO run
    assert both.loc["verifier", "measured_ratio"] == 1.0
    write_figures(make_config(tmp_path), math_suite(), runs, str(tmp_path / "fig"))
    for name in ("grad_norm", "team_reward", "theory_check"):
        assert (tmp_path / "fig" / f"math_{name}.png").stat().st_size > 5_000
