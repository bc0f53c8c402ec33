"""Advantage estimators against a plain loop reference and hand-worked groups."""

import math
import random
import statistics

import numpy as np
import pytest
import torch

from drmas.algos.advantages import (
    compute_advantages,
    dense_codes,
    DIAG_KEYS,
    lemma_diagnostics,
)
from drmas.errors import ConfigError

EPS = 1e-6
PAIRS = [(m, s) for m in ("global", "agent") for s in ("global", "agent")]


def reference(scores, uid, traj, agent, mean_by, std_by, norm_by_std, eps=EPS):
    """Obviously-correct loop: build both pools with dicts, then one formula per row."""
    uid, traj, agent = (_plain(x) for x in (uid, traj, agent))
    rows_of_traj = {}
    for s, u, t in zip(scores, uid, traj):
        rows_of_traj.setdefault((u, t), []).append(s)
    traj_mean = {key: sum(v) / len(v) for key, v in rows_of_traj.items()}
    pool = {"global": {}, "agent": {}}
    for (u, _t), m in traj_mean.items():
        pool["global"].setdefault(u, []).append(m)
    for s, u, a in zip(scores, uid, agent):
        pool["agent"].setdefault((u, a), []).append(s)

    def stats(values):
        if len(values) == 1:
            return 0.0, 1.0
        return statistics.fmean(values), statistics.stdev(values)

    out = []
    for s, u, t, a in zip(scores, uid, traj, agent):
        pool_key = {"global": u, "agent": (u, a)}
        score = traj_mean[(u, t)] if mean_by == "global" else s
        mu, _ = stats(pool[mean_by][pool_key[mean_by]])
        _, sd = stats(pool[std_by][pool_key[std_by]])
        out.append((score - mu) / (sd + eps) if norm_by_std else score - mu)
    return out


def _plain(ids):
    return ids.tolist() if isinstance(ids, (np.ndarray, torch.Tensor)) else list(ids)


def random_case(rng: random.Random):
    """Several uids, unequal group sizes, traj ids reused across uids, agents that speak
    several times or not at all, discrete scores (zero-variance and singleton pools) or
    continuous ones; rows shuffled so groups interleave."""
    agents = ["solver", "verifier", "searcher"][: rng.randint(1, 3)]
    discrete = rng.random() < 0.6
    rows = []
    for u in range(rng.randint(1, 4)):
        for t in range(rng.randint(1, 6)):
            team = rng.choice([0.0, 1.0])
            for _ in range(rng.randint(1, 5)):
                if discrete:
                    score = team - rng.choice([0.0, 0.0, 0.1])
                else:
                    score = rng.uniform(-1, 1)
                rows.append((score, u, t, rng.choice(agents)))
    rng.shuffle(rows)
    scores, uid, traj, agent = (list(col) for col in zip(*rows))
    form = rng.choice(["list", "numpy", "tensor"])
    agent_codes = [agents.index(a) for a in agent]
    if form == "list":
        return scores, [f"uid-{u}" for u in uid], traj, agent
    if form == "numpy":
        return np.array(scores), np.array(uid), np.array([f"t{t}" for t in traj]), np.array(agent)
    return torch.tensor(scores), torch.tensor(uid), torch.tensor(traj), torch.tensor(agent_codes)


def assert_matches(got, want):
    assert got.dtype == torch.float32 and got.shape == (len(want),)
    want = torch.tensor(want, dtype=torch.float64)
    torch.testing.assert_close(got.double(), want, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("mean_by,std_by", PAIRS)
def test_matches_reference_on_random_cases(mean_by, std_by):
    rng = random.Random(PAIRS.index((mean_by, std_by)))
    for _ in range(200):
        case = random_case(rng)
        plain_scores = [float(s) for s in case[0]]
        for norm in (True, False):
            got = compute_advantages(*case, mean_by=mean_by, std_by=std_by, norm_by_std=norm)
            assert_matches(got, reference(plain_scores, *case[1:], mean_by, std_by, norm))


def test_id_forms_agree():
    scores = [1.0, 0.9, 0.0, 0.0, 0.5, 1.0]
    uid_s, uid_i = ["a", "a", "a", "a", "b", "b"], [7, 7, 7, 7, 3, 3]
    traj = [0, 0, 1, 1, 0, 0]
    agent_s, agent_i = ["s", "v", "s", "v", "s", "v"], [0, 1, 0, 1, 0, 1]
    want = compute_advantages(scores, uid_s, traj, agent_s, mean_by="agent", std_by="agent")
    for uid, ag in [(np.array(uid_i), np.array(agent_i)), (torch.tensor(uid_i), torch.tensor(agent_i))]:
        got = compute_advantages(torch.tensor(scores), uid, torch.tensor(traj), ag,
                                 mean_by="agent", std_by="agent")
        torch.testing.assert_close(got, want)


# --- hand-worked groups ---------------------------------------------------------------
# One prompt, two trajectories, two agents:
#   traj a: solver 1.0, verifier 0.9        traj b: solver 0.0, verifier 0.0
HAND = dict(
    scores=[1.0, 0.9, 0.0, 0.0],
    uid=["q", "q", "q", "q"],
    traj_uid=["a", "a", "b", "b"],
    agent=["solver", "verifier", "solver", "verifier"],
)
SQ2 = math.sqrt(2.0)


def test_hand_grpo():
    # global pool: trajectory means {0.95, 0.0}; mu = 0.475, sd = sqrt(2 * 0.475^2 / 1)
    # = 0.475 * sqrt(2); each row takes its trajectory mean: A = +-0.475 / (sd + eps)
    a = 0.475 / (0.475 * SQ2 + EPS)
    assert_matches(compute_advantages(**HAND), [a, a, -a, -a])
    # Dr.GRPO (no std): A = score - mu = +-0.475
    assert_matches(compute_advantages(**HAND, norm_by_std=False), [0.475, 0.475, -0.475, -0.475])


def test_hand_drmas():
    # solver pool {1.0, 0.0}: mu 0.5, sd 0.5*sqrt(2); verifier pool {0.9, 0.0}: mu 0.45,
    # sd 0.45*sqrt(2); every row uses its own score: A = +-0.5/(0.5 sqrt2) = +-0.45/(0.45 sqrt2)
    s, v = 0.5 / (0.5 * SQ2 + EPS), 0.45 / (0.45 * SQ2 + EPS)
    got = compute_advantages(**HAND, mean_by="agent", std_by="agent")
    assert_matches(got, [s, v, -s, -v])


def test_hand_mixed():
    # mean from the agent pool, std from the global pool (sd_global = 0.475 sqrt2):
    # solver (1.0 - 0.5) / 0.6718 = 0.7443, verifier (0.9 - 0.45) / 0.6718 = 0.6699
    g = 0.475 * SQ2 + EPS
    got = compute_advantages(**HAND, mean_by="agent", std_by="global")
    assert_matches(got, [0.5 / g, 0.45 / g, -0.5 / g, -0.45 / g])
    # mean from the global pool (row score = trajectory mean), std from the agent pool:
    # solver rows (0.95 - 0.475) / (0.5 sqrt2) = 0.6718, verifier rows 0.475 / (0.45 sqrt2) = 0.7464
    s, v = 0.5 * SQ2 + EPS, 0.45 * SQ2 + EPS
    got = compute_advantages(**HAND, mean_by="global", std_by="agent")
    assert_matches(got, [0.475 / s, 0.475 / v, -0.475 / s, -0.475 / v])


def test_hand_agent_speaking_twice():
    # traj a: solver 1.0, verifier 0.9, verifier 1.0; traj b: solver 0.0, verifier 0.0
    # verifier pool {0.9, 1.0, 0.0}: mu = 1.9/3, deviations 0.2667, 0.3667, -0.6333,
    # sd = sqrt((0.2667^2 + 0.3667^2 + 0.6333^2) / 2) = 0.5508
    # -> A = 0.4842, 0.6658, -1.1499; the solver pool is as before (+-0.7071)
    scores = [1.0, 0.9, 1.0, 0.0, 0.0]
    agent = ["solver", "verifier", "verifier", "solver", "verifier"]
    mu = 1.9 / 3
    sd = math.sqrt(((0.9 - mu) ** 2 + (1.0 - mu) ** 2 + mu**2) / 2)
    s = 0.5 / (0.5 * SQ2 + EPS)
    got = compute_advantages(scores, ["q"] * 5, [0, 0, 0, 1, 1], agent, mean_by="agent", std_by="agent")
    assert_matches(got, [s, (0.9 - mu) / (sd + EPS), (1.0 - mu) / (sd + EPS), -s, -mu / (sd + EPS)])
    # under GRPO trajectory a counts once, with mean 2.9/3, not three times
    m = 2.9 / 3 / 2
    a = m / (m * SQ2 + EPS)
    assert_matches(compute_advantages(scores, ["q"] * 5, [0, 0, 0, 1, 1], agent), [a, a, a, -a, -a])


def test_singleton_pools_use_mu0_sd1():
    # one trajectory in uid "lonely": global pool of one -> A = 0.8 / (1 + eps)
    got = compute_advantages([0.8, 0.8], ["lonely"] * 2, [0, 0], ["s", "v"])
    assert_matches(got, [0.8 / (1 + EPS)] * 2)
    # the verifier speaks once in its uid: agent pool of one -> A = its score / (1 + eps)
    got = compute_advantages([1.0, 0.0, 0.7], ["q"] * 3, [0, 1, 0], ["s", "s", "v"],
                             mean_by="agent", std_by="agent")
    assert got[2].item() == pytest.approx(0.7 / (1 + EPS))


def test_zero_variance_group_gives_zero():
    got = compute_advantages([0.9, 0.9, 0.9, 0.9], ["q"] * 4, [0, 1, 2, 3], ["s"] * 4)
    assert got.abs().max().item() < 1e-8


def test_traj_ids_are_scoped_by_uid():
    # both uids use traj ids 0 and 1: same result as globally unique traj ids
    scores = [1.0, 0.0, 0.2, 0.6, 0.5, 0.1]
    uid = ["x", "x", "x", "y", "y", "y"]
    agent = ["s", "v", "s", "s", "v", "s"]
    shared = compute_advantages(scores, uid, [0, 0, 1, 0, 1, 1], agent)
    unique = compute_advantages(scores, uid, [0, 0, 1, 2, 3, 3], agent)
    torch.testing.assert_close(shared, unique)


def test_tensor_scores_keep_device_and_empty_batch():
    got = compute_advantages(torch.tensor([1.0, 0.0]), [0, 0], [0, 1], [0, 0])
    assert got.device == torch.device("cpu") and got.dtype == torch.float32
    assert compute_advantages([], [], [], []).shape == (0,)


def test_errors():
    with pytest.raises(ConfigError, match="mean_by"):
        compute_advantages([1.0], [0], [0], [0], mean_by="agents")
    with pytest.raises(ValueError, match="differ in length"):
        compute_advantages([1.0, 2.0], [0], [0, 1], [0, 0])


def test_dense_codes():
    assert dense_codes(["b", "a", "b", "c"]).tolist() == [0, 1, 0, 2]
    assert dense_codes([10, -3, 10]).tolist() == [0, 1, 0]
    assert dense_codes([1, "x", 1]).tolist() == [0, 1, 0]  # mixed list falls back to a dict
    codes, uniques = dense_codes(np.array(["v", "s", "v"]), return_uniques=True)
    assert codes.tolist() == [0, 1, 0] and [str(u) for u in uniques] == ["v", "s"]


def diagnostics_reference(scores, uid, traj, agent, informative_only):
    """Plain loop in the paper code's style: dicts of lists per uid and per (uid, agent),
    then one (gap, var_ratio, inflation) per group, then numpy summaries per agent."""
    uid, traj, agent = (_plain(x) for x in (uid, traj, agent))
    scores = [float(s) for s in scores]
    per_traj, per_agent = {}, {}
    for s, u, t, a in zip(scores, uid, traj, agent):
        per_traj.setdefault((u, t), []).append(s)
        per_agent.setdefault((u, a), []).append(s)
    per_uid = {}
    for (u, _t), vals in per_traj.items():
        per_uid.setdefault(u, []).append(statistics.fmean(vals))

    def stats(vals):
        return (0.0, 1.0) if len(vals) == 1 else (statistics.fmean(vals), statistics.stdev(vals))

    found = {}
    for (u, a), vals in per_agent.items():
        found.setdefault(str(a), [])
        mu, sd = stats(per_uid[u])
        mu_k, sd_k = stats(vals)
        if informative_only and (len(per_uid[u]) < 2 or sd == 0 or len(vals) < 2):
            continue
        gap = mu_k - mu
        found[str(a)].append((gap, sd_k**2 / (sd**2 + 1e-12), (sd_k**2 + gap**2) / (sd**2 + 1e-12)))
    out = {}
    for a, groups in found.items():
        if not groups:
            out[a] = {"num_groups": 0}
            continue
        g, v, f = (np.array(col) for col in zip(*groups))
        out[a] = dict(zip(DIAG_KEYS, (g.mean(), abs(g).mean(), abs(g).max(), v.mean(), v.min(),
                                      v.max(), f.mean(), np.percentile(f, 95), f.max())))
        out[a]["num_groups"] = len(groups)
    return out


@pytest.mark.parametrize("informative_only", [True, False])
def test_lemma_diagnostics_match_loop_reference(informative_only):
    rng = random.Random(int(informative_only))
    for _ in range(200):
        case = random_case(rng)
        got = lemma_diagnostics(*case, informative_only=informative_only)
        want = diagnostics_reference(*case, informative_only)
        assert set(got) == set(want)
        for a, stats in want.items():
            assert got[a].keys() == stats.keys()
            for key, value in stats.items():
                assert got[a][key] == pytest.approx(value, rel=1e-9, abs=1e-9), (a, key)


def test_lemma_diagnostics_hand_example():
    out = lemma_diagnostics(**HAND)
    # global: trajectory means {0.95, 0}: mu 0.475, sigma^2 = 0.45125; solver {1, 0}: mu_k 0.5,
    # sigma_k^2 0.5; verifier {0.9, 0}: 0.45, 0.405
    sol, ver = out["solver"], out["verifier"]
    assert sol["mean_gap_mean"] == pytest.approx(0.025)
    assert ver["mean_gap_mean"] == pytest.approx(-0.025)
    assert sol["var_ratio_max"] == pytest.approx(0.5 / 0.45125)
    assert sol["inflation_factor_mean"] == pytest.approx((0.5 + 0.025**2) / 0.45125)
    assert ver["inflation_factor_p95"] == pytest.approx((0.405 + 0.025**2) / 0.45125)
    assert sol["num_groups"] == ver["num_groups"] == 1
    assert lemma_diagnostics([], [], [], []) == {}


def test_lemma_diagnostics_skip_uninformative_groups():
    scores = HAND["scores"] + [1.0, 1.0] + [0.3, 0.7] + [1.0, 0.0]
    uid = HAND["uid"] + ["flat", "flat"] + ["r", "r"] + ["one", "one"]
    traj = HAND["traj_uid"] + [0, 1] + [0, 1] + [0, 1]
    agent = HAND["agent"] + ["solver", "solver"] + ["solver", "solver"] + ["solver", "verifier"]
    out = lemma_diagnostics(scores, uid, traj, agent)
    # "flat" has sigma = 0 and "one" holds one row per agent: both skipped; in "r" the solver
    # is the only agent, so its factor is exactly 1
    assert out["solver"]["num_groups"] == 2 and out["verifier"]["num_groups"] == 1
    hand = (0.5 + 0.025**2) / 0.45125
    assert out["solver"]["inflation_factor_mean"] == pytest.approx((hand + 1) / 2)
    assert out["solver"]["inflation_factor_max"] == pytest.approx(hand)
    # the paper code's view keeps them: in "one" (sigma^2 = 0.5) the verifier's pool of one
    # counts as mu_k = 0, sigma_k = 1: inflation (1 + 0.5^2) / 0.5
    raw = lemma_diagnostics(scores, uid, traj, agent, informative_only=False)
    assert raw["solver"]["num_groups"] == 4 and raw["verifier"]["num_groups"] == 2
    assert raw["verifier"]["inflation_factor_max"] == pytest.approx((1 + 0.5**2) / 0.5)
    lonely = lemma_diagnostics([1.0, 0.0], ["q", "q"], [0, 1], ["s", "v"])
    assert lonely == {"s": {"num_groups": 0}, "v": {"num_groups": 0}}

