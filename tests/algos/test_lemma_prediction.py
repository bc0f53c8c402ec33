"""`lemma_prediction` and `pool_std_fractions` against hand computations and plain loops.

Here `lemma_prediction` predicts for today's GRPO only (its keys without a suffix);
tests/algos/test_grpo_2025.py covers `grpo_2025`'s."""

import random
import statistics

import numpy as np
import pytest

from drmas.algos.advantages import (
    ROUNDOFF_RTOL,
    compute_advantages,
    lemma_diagnostics,
    pool_std_fractions,
)
from drmas.algos.advantages import lemma_prediction as _lemma_prediction

EPS = 1e-6


def lemma_prediction(*args, **kwargs):
    return _lemma_prediction(*args, estimators=["grpo"], **kwargs)


# --- plain-loop references ---------------------------------------------------------------
def _stats(values):
    """Upstream's pool statistics: a pool of one has mu = 0, sd = 1; else mean, unbiased std."""
    if len(values) == 1:
        return 0.0, 1.0
    return statistics.fmean(values), statistics.stdev(values)


def prediction_reference(scores, uid, traj, agent, norm_by_std=True, eps=EPS):
    """Dicts of lists, one formula per row, then sums per agent."""
    rows_of_traj, scale = {}, {}
    for s, u, t in zip(scores, uid, traj):
        rows_of_traj.setdefault((u, t), []).append(s)
        scale[u] = max(scale.get(u, 0.0), abs(s))
    traj_mean = {key: statistics.fmean(v) for key, v in rows_of_traj.items()}
    per_uid, per_agent = {}, {}
    for (u, _t), m in traj_mean.items():
        per_uid.setdefault(u, []).append(m)
    for s, u, a in zip(scores, uid, agent):
        per_agent.setdefault((u, a), []).append(s)

    def flat(values, u):          # >= 2 values equal up to round-off: their advantages are 0
        return len(values) >= 2 and statistics.stdev(values) <= ROUNDOFF_RTOL * scale[u]

    sums = {}
    for s, u, t, a in zip(scores, uid, traj, agent):
        x = traj_mean[(u, t)]
        mu, sd = _stats(per_uid[u])
        a_g = 0.0 if flat(per_uid[u], u) else (x - mu) / (sd + eps) if norm_by_std else x - mu
        mu_k, sd_k = _stats(per_agent[(u, a)])
        a_d = 0.0 if flat(per_agent[(u, a)], u) else (
            (s - mu_k) / (sd_k + eps) if norm_by_std else s - mu_k)
        informative = len(per_uid[u]) >= 2 and not flat(per_uid[u], u)
        z2 = ((x - mu) / sd) ** 2 if informative else 0.0
        acc = sums.setdefault(a, {"n": 0, "g": 0.0, "d": 0.0, "z2": 0.0, "rows": 0, "groups": set()})
        acc["n"] += 1
        acc["g"] += a_g * a_g
        acc["d"] += a_d * a_d
        if informative:
            acc["z2"] += z2
            acc["rows"] += 1
            acc["groups"].add(u)
    return {a: {"grpo_adv_sq": v["g"] / v["n"], "drmas_adv_sq": v["d"] / v["n"],
                "predicted_ratio": v["g"] / v["d"] if v["d"] > 0 else None,
                "lemma_factor": v["z2"] / v["rows"] if v["rows"] else None,
                "lemma_rows": v["rows"], "lemma_groups": len(v["groups"])}
            for a, v in sums.items()}


def trained_ratio(scores, uid, traj, agent, name, norm_by_std=True):
    """sum A_grpo^2 / sum A_drmas^2 over `name`'s rows, from `compute_advantages` itself."""
    mine = np.array([a == name for a in agent])
    sq = []
    for pool in ("global", "agent"):
        adv = compute_advantages(np.array(scores), uid, traj, agent, mean_by=pool, std_by=pool,
                                 norm_by_std=norm_by_std).double().numpy()
        sq.append(float((adv[mine] ** 2).sum()))
    return sq[0] / sq[1]


def assert_close(got, want):
    assert set(got) == set(want)
    for a, stats in want.items():
        assert got[a].keys() == stats.keys(), a
        for key, value in stats.items():
            if value is None or isinstance(value, int):
                assert got[a][key] == value, (a, key)
            else:
                assert got[a][key] == pytest.approx(value, rel=1e-5, abs=1e-9), (a, key)


# --- a hand-worked batch -----------------------------------------------------------------
# uid a: trajectories 0.95 (solver 1.0, verifier 0.9 invalid), 0 (0, 0), 1 (1, 1, solver 1);
# uid b: trajectory means 0.5, 0.5 (no spread); uid c: one trajectory
HAND = {
    "scores": [1.0, 0.9, 0.0, 0.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 1.0, 0.0],
    "uid": ["a"] * 7 + ["b"] * 3 + ["c"] * 2,
    "traj_uid": [0, 0, 1, 1, 2, 2, 2, 0, 1, 1, 0, 0],
    "agent": ["solver", "verifier", "solver", "verifier", "solver", "verifier", "solver",
              "solver", "solver", "verifier", "solver", "verifier"],
}


def test_hand_example_lemma_factor():
    out = lemma_prediction(**HAND)
    # uid a: trajectory means 0.95, 0, 1: mu = 0.65, sigma^2 = (0.3^2 + 0.65^2 + 0.35^2) / 2
    sigma2 = (0.09 + 0.4225 + 0.1225) / 2
    # solver rows' trajectory means 0.95, 0, 1, 1: mu_k = 0.7375, population sigma_k^2
    mu_k = (0.95 + 0 + 1 + 1) / 4
    sk2 = (0.95**2 + 0 + 1 + 1) / 4 - mu_k**2
    solver = (sk2 + (mu_k - 0.65) ** 2) / sigma2
    assert solver == pytest.approx(0.189375 / 0.3175)
    # verifier rows' trajectory means 0.95, 0, 1: its factor is (n-1)/n = 2/3 of uid a's
    assert out["solver"]["lemma_factor"] == pytest.approx(solver)
    assert out["verifier"]["lemma_factor"] == pytest.approx(2 / 3)
    # b (no spread) and c (one trajectory) are not informative
    assert (out["solver"]["lemma_rows"], out["solver"]["lemma_groups"]) == (4, 1)
    assert (out["verifier"]["lemma_rows"], out["verifier"]["lemma_groups"]) == (3, 1)
    assert_close(out, prediction_reference(HAND["scores"], HAND["uid"], HAND["traj_uid"],
                                           HAND["agent"]))


def test_hand_example_second_moments():
    out = lemma_prediction(**HAND)
    s, u, t, a = HAND.values()
    # GRPO: uid a's rows (x - 0.65) / sigma; b: 0; c: the singleton convention, A = 0.5 / (1 + eps)
    sigma = (0.3175) ** 0.5
    grpo_solver = [(0.95 - 0.65) / sigma, (0 - 0.65) / sigma, 0.35 / sigma, 0.35 / sigma, 0, 0,
                   0.5 / (1 + EPS)]
    # Dr. MAS: a's solver pool {1, 0, 1, 1}, b's {0.5, 0.5} (0), c's pool of one (1.0)
    mu, sd = statistics.fmean([1, 0, 1, 1]), statistics.stdev([1, 0, 1, 1])
    drmas_solver = [(x - mu) / (sd + EPS) for x in (1, 0, 1, 1)] + [0, 0, 1 / (1 + EPS)]
    sol = out["solver"]
    assert sol["grpo_adv_sq"] == pytest.approx(np.mean(np.square(grpo_solver)), rel=1e-5)
    assert sol["drmas_adv_sq"] == pytest.approx(np.mean(np.square(drmas_solver)), rel=1e-5)
    want = sum(x * x for x in grpo_solver) / sum(x * x for x in drmas_solver)
    assert sol["predicted_ratio"] == pytest.approx(want, rel=1e-5)
    # exactly what compute_advantages trains on
    for name in ("solver", "verifier"):
        assert out[name]["predicted_ratio"] == pytest.approx(trained_ratio(s, u, t, a, name),
                                                             rel=1e-6)
    assert lemma_prediction([], [], [], []) == {}


def test_rows_weighting():
    """Groups count by the agent's rows: 4 solver rows at 0.5965 and 2 at 0.5 weigh 4:2."""
    scores = HAND["scores"][:7] + [1.0, 0.0]
    uid = HAND["uid"][:7] + ["r", "r"]
    traj = HAND["traj_uid"][:7] + [0, 1]
    agent = HAND["agent"][:7] + ["solver", "solver"]
    out = lemma_prediction(scores, uid, traj, agent)["solver"]
    a_factor, r_factor = 0.189375 / 0.3175, 0.5     # r: (1 - 0.5)^2 + (0 - 0.5)^2 over 2 x 0.5
    assert out["lemma_factor"] == pytest.approx((4 * a_factor + 2 * r_factor) / 6)
    assert out["lemma_factor"] != pytest.approx((a_factor + r_factor) / 2)
    assert (out["lemma_rows"], out["lemma_groups"]) == (6, 2)


def test_penalty_example_not_upstream_factor():
    """Team reward 0 in all 5 trajectories, three invalid rows (penalty 0.1): upstream's
    factor says 5.61 for the Verifier, the advantages GRPO trains on have second moment 0.59
    (Dr. MAS's 0.86): the prediction is their ratio, not 5.61."""
    traj = [0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 4, 4, 4, 4]
    agent = ["solver", "verifier"] * 5 + ["solver"] + ["solver", "verifier"] * 2
    valid = [1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1]
    scores = [0.0 - 0.1 * (1 - v) for v in valid]
    uid = ["q"] * len(scores)
    upstream = lemma_diagnostics(scores, uid, traj, agent)["verifier"]
    assert upstream["inflation_factor_mean"] == pytest.approx(5.61, abs=0.005)
    out = lemma_prediction(scores, uid, traj, agent)
    ver = out["verifier"]
    assert ver["grpo_adv_sq"] == pytest.approx(0.59, abs=0.005)
    assert ver["drmas_adv_sq"] == pytest.approx(0.86, abs=0.005)
    assert ver["predicted_ratio"] == pytest.approx(trained_ratio(scores, uid, traj, agent,
                                                                 "verifier"), rel=1e-6)
    assert ver["predicted_ratio"] == pytest.approx(0.5877 / 0.8571, abs=0.001)
    # the lemma's factor from trajectory means is GRPO's second moment (up to eps), <= 1
    assert ver["lemma_factor"] == pytest.approx(ver["grpo_adv_sq"], rel=1e-3)
    assert_close(out, prediction_reference(scores, uid, traj, agent))


def test_roundoff_group_is_not_informative():
    """Trajectories (0.99, 0.99, 1, 1) and (0.99, 1, 1, 0.99) have equal means up to an ulp:
    upstream's sigma > 0 keeps them (a factor of ~1e7); here they are no spread at all."""
    scores = [0.99, 0.99, 1.0, 1.0, 0.99, 1.0, 1.0, 0.99]
    traj = [0] * 4 + [1] * 4
    agent = ["solver", "verifier"] * 4
    uid = ["q"] * 8
    upstream = lemma_diagnostics(scores, uid, traj, agent)["solver"]
    assert upstream["num_groups"] == 1 and upstream["inflation_factor_mean"] > 1e6
    out = lemma_prediction(scores, uid, traj, agent)["solver"]
    assert out["lemma_factor"] is None and (out["lemma_rows"], out["lemma_groups"]) == (0, 0)
    assert out["grpo_adv_sq"] == 0.0 and out["predicted_ratio"] == 0.0
    # its pool {0.99, 1, 0.99, 1}: (n-1)/n = 0.75, less eps's share of a std of 0.0058
    assert out["drmas_adv_sq"] == pytest.approx(0.75, rel=1e-3)


def test_no_denominator_and_norm_by_std_off():
    # every agent pool constant, the trajectory means not: Dr. MAS gives nothing to divide by
    scores, uid = [1.0, 0.0, 1.0, 1.0, 0.0], ["q"] * 5
    traj, agent = [0, 0, 1, 1, 1], ["s", "v", "s", "s", "v"]
    out = lemma_prediction(scores, uid, traj, agent)
    assert out["s"]["predicted_ratio"] is None and out["s"]["drmas_adv_sq"] == 0.0
    assert out["s"]["grpo_adv_sq"] > 0 and out["s"]["lemma_factor"] is not None
    # without norm_by_std the advantages are score - mu, the lemma's factor unchanged
    off = lemma_prediction(*HAND.values(), norm_by_std=False)
    for name in ("solver", "verifier"):
        assert off[name]["predicted_ratio"] == pytest.approx(
            trained_ratio(*HAND.values(), name, norm_by_std=False), rel=1e-6)
        assert off[name]["lemma_factor"] == pytest.approx(lemma_prediction(**HAND)[name]["lemma_factor"])
    assert_close(off, prediction_reference(*HAND.values(), norm_by_std=False))


def random_case(rng: random.Random):
    """Several uids and trajectories, agents speaking 0-3 times, scores from a small set (so
    a pool spreads by >= 0.01 or not at all) with format penalties."""
    scores, uid, traj, agent = [], [], [], []
    for u in range(rng.randint(1, 4)):
        reward = rng.choice([0.0, 1.0])
        for t in range(rng.randint(1, 5)):
            team = reward if rng.random() < 0.6 else 1.0 - reward
            for _ in range(rng.randint(1, 4)):
                scores.append(team - (0.1 if rng.random() < 0.2 else 0.0))
                uid.append(f"u{u}")
                traj.append(t)
                agent.append(rng.choice(["solver", "verifier", "critic"]))
    order = list(range(len(scores)))
    rng.shuffle(order)
    return tuple([x[i] for i in order] for x in (scores, uid, traj, agent))


@pytest.mark.parametrize("norm_by_std", [True, False])
def test_matches_loop_reference(norm_by_std):
    rng = random.Random(7 + norm_by_std)
    for _ in range(150):
        case = random_case(rng)
        assert_close(lemma_prediction(*case, norm_by_std=norm_by_std),
                     prediction_reference(*case, norm_by_std=norm_by_std))


# --- pool std fractions ------------------------------------------------------------------
def fractions_reference(scores, uid, agent):
    pools = {}
    for s, u, a in zip(scores, uid, agent):
        pools.setdefault((u, a), []).append(s)
    out = {}
    for (_u, a), vals in pools.items():
        sd = _stats(vals)[1]
        out.setdefault(a, []).append(sd)
    return {a: {"frac_below_1e-3": sum(sd < 1e-3 for sd in sds) / len(sds),
                "frac_below_1e-2": sum(sd < 1e-2 for sd in sds) / len(sds)}
            for a, sds in out.items()}


def test_pool_std_fractions_hand_and_loop():
    # solver pools: a {1, 0, 1, 1} (0.5), b {0.5, 0.5} (0), c {1} (one: sd 1, never below);
    # verifier pools: a {0.9, 0, 1}, b {0.5} (one), c {0} (one)
    out = pool_std_fractions(HAND["scores"], HAND["uid"], HAND["agent"])
    assert out == {"solver": {"frac_below_1e-3": 1 / 3, "frac_below_1e-2": 1 / 3},
                   "verifier": {"frac_below_1e-3": 0.0, "frac_below_1e-2": 0.0}}
    # strictly below: a pool at sd 0.005 is below 1e-2 only
    out = pool_std_fractions([0.0, 0.005 * 2**0.5, 1.0, 1.0], ["x", "x", "y", "y"], ["s"] * 4)
    assert out == {"s": {"frac_below_1e-3": 0.5, "frac_below_1e-2": 1.0}}
    rng = random.Random(3)
    for _ in range(150):
        scores, uid, _traj, agent = random_case(rng)
        scores = [s + rng.choice([0.0, 0.0, 1e-4, 3e-3, 0.2]) for s in scores]
        got = pool_std_fractions(scores, uid, agent)
        want = fractions_reference(scores, uid, agent)
        assert set(got) == set(want)
        for a in want:
            for key in want[a]:
                assert got[a][key] == pytest.approx(want[a][key]), (a, key)
    assert pool_std_fractions([], [], []) == {}
