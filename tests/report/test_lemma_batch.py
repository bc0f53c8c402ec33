"""`drmas predict`: Lemma 4.2's prediction for a batch drawn from an evaluation's samples,
checked against closed forms, a hand-built batch and the trainer's own row order."""

import json

import numpy as np
import pytest

from drmas.algos.advantages import lemma_prediction
from drmas.cli import main as cli
from drmas.errors import DataError
from drmas.report.lemma_batch import batch_from_samples, predict_from_samples, read_samples
from drmas.algos.batching import upstream_batch_order
from repo import REPO

SEARCH = ["--config", REPO / "config" / "default.yaml", "--suite", REPO / "benchmarks" / "search.yaml"]


def sample(pid, k, score, agents, invalid=()):
    return {"problem_id": pid, "sample": k, "score": score,
            "turns": [{"agent": a, "valid": i not in invalid} for i, a in enumerate(agents)]}


def withholding_group(pid="q"):
    """One answered right, one answered wrong, six unanswered (the Verifier says "no" every
    turn): the toy batch of docs/regimes.md, R2."""
    answered = ["verifier", "answerer"]
    unanswered = ["verifier", "searcher", "verifier"]
    return ([sample(pid, 0, 1.0, answered), sample(pid, 1, 0.0, answered)]
            + [sample(pid, k, 0.0, unanswered) for k in range(2, 8)])


def test_the_withholding_toy_gives_the_closed_forms():
    # GRPO's pool: trajectory values 1, 0 x 7: mu 1/8, unbiased sd sqrt(1/8). The Answerer's
    # rows score 1 and 0: lemma factor (1/4 + (1/2 - 1/8)^2) / (1/8) = 3.125; its squared GRPO
    # advantages sum to 7/8^2 * 8 + 1/8 = 6.25 against Dr. MAS's 1 (pool [1, 0], sd sqrt(1/2)).
    got = predict_from_samples(withholding_group(), group_n=8, penalty=0.01)
    answerer = got["agents"]["answerer"]
    assert answerer["lemma_factor"] == pytest.approx(3.125, rel=1e-6)
    assert answerer["predicted_ratio"] == pytest.approx(6.25, rel=1e-5)
    assert answerer["grpo_adv_sq"] == pytest.approx(3.125, rel=1e-5)
    assert answerer["drmas_adv_sq"] == pytest.approx(0.5, rel=1e-5)
    assert got["speaks"] == {"answerer": 0.25, "searcher": 0.75, "verifier": 1.0}
    assert (got["groups"], got["unequal_groups"], got["team_reward"]) == (1, 1.0, 0.125)


def test_groups_are_consecutive_samples_and_malformed_turns_pay_the_penalty():
    samples = [sample("b", k, float(k % 2), ["solver", "verifier"], invalid={1} if k == 3 else ())
               for k in reversed(range(11))] + [sample("a", k, 1.0, ["solver"]) for k in range(3)]
    scores, uid, traj, agent, order, groups = batch_from_samples(samples, group_n=5, penalty=0.1)
    # b: samples 0-4 and 5-9 (sample 10 left out), a: fewer than 5 samples, no group
    assert order is None
    assert uid == [f"b/{k // 5}" for k in range(10) for _ in range(2)]
    assert traj == [f"b/{k // 5}/{k}" for k in range(10) for _ in range(2)]
    assert agent == ["solver", "verifier"] * 10
    want = [float(k % 2) - (0.1 if (k, t) == (3, 1) else 0.0) for k in range(10) for t in range(2)]
    assert np.allclose(scores, want)
    assert groups == [[0.0, 1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 1.0, 0.0, 1.0]]


def test_the_batch_order_is_the_trainers_for_the_worker_groups():
    # the Searcher's group ranks first: grpo_2025 reads each trajectory's first row in that order
    samples = [sample("q", k, float(k < 3), ["verifier", "searcher", "verifier"],
                      invalid={0} if k in (1, 5) else ()) for k in range(8)]
    agent_group = {"searcher": "g0", "verifier": "g1"}
    scores, uid, traj, agent, order, _ = batch_from_samples(samples, 8, 0.1, agent_group)
    rows = [{"group": agent_group[a]} for a in agent]
    assert list(order) == list(upstream_batch_order(rows, ["g0", "g1"]))
    want = lemma_prediction(scores, uid, traj, agent, order=upstream_batch_order(rows, ["g0", "g1"]))
    got = predict_from_samples(samples, 8, 0.1, agent_group)["agents"]
    assert got == want
    in_turn_order = predict_from_samples(samples, 8, 0.1)["agents"]
    assert got["verifier"]["grpo_2025_adv_sq"] != in_turn_order["verifier"]["grpo_2025_adv_sq"]


def test_predict_command_writes_the_prediction(tmp_path, capsys):
    folder = tmp_path / "evals" / "base"
    folder.mkdir(parents=True)
    lines = [json.dumps(s) for p in ("p1", "p2") for s in withholding_group(p)]
    (folder / "samples.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "scores.json").write_text(json.dumps({"meta": {"assignment": "nonshared"}}))
    out = tmp_path / "prediction.json"
    assert cli.main([str(a) for a in ["predict", *SEARCH, "--samples", folder / "samples.jsonl",
                                      "--group-n", 8, "--out", out]]) == 0
    got = json.loads(out.read_text())
    assert (got["assignment"], got["groups"], got["penalty"]) == ("nonshared", 2, 0.01)
    assert got["agents"]["answerer"]["predicted_ratio"] == pytest.approx(6.25, rel=1e-5)
    assert "| answerer | 4 |" in capsys.readouterr().out


def test_predict_names_what_is_missing(tmp_path):
    with pytest.raises(DataError, match="no such samples file"):
        read_samples(tmp_path / "none.jsonl")
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps(sample("q", 0, 1.0, ["answerer"])) + "\n")
    assert cli.main([str(a) for a in ["predict", *SEARCH, "--samples", path]]) == 2
    with pytest.raises(DataError, match="no problem has 5 samples"):
        batch_from_samples([sample("q", 0, 1.0, ["answerer"])], 5, 0.01)


@pytest.mark.parametrize("scores", [None, "{not json", '{"meta": {}}', '{"meta": {"assignment": 3}}'],
                         ids=["missing", "not json", "no assignment", "not a name"])
def test_predict_without_the_evaluations_assignment_asks_for_it_in_one_line(tmp_path, capsys, scores):
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps(sample("q", 0, 1.0, ["answerer"])) + "\n")
    if scores is not None:
        (tmp_path / "scores.json").write_text(scores)
    assert cli.main([str(a) for a in ["predict", *SEARCH, "--samples", path]]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "no evaluation metadata to name the assignment; give --assignment" in err[0]
