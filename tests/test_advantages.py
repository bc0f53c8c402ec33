"""Advantage estimators against a plain loop reference and hand-worked groups."""

import math
import random
import statistics

import numpy as np
import pytest
import torch

from drmas.algos.advantages import (
    METHODS,
    compute_advantages,
    dense_codes,
    group_stats,
    method_modes,
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
    with pytest.raises(ConfigError, match="valid: .*drmas.*grpo"):
        method_modes("gpro")
    assert method_modes("drmas") == ("agent", "agent")
    assert set(METHODS) == {"grpo", "drmas", "mean_agent_std_global", "mean_global_std_agent"}
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


def test_group_stats_hand_example():
    out = group_stats(**HAND)
    # global: mean of trajectory means 0.475, std 0.475 sqrt2 (sigma^2 = 0.45125)
    assert out["global"]["mean"] == pytest.approx(0.475)
    assert out["global"]["std"] == pytest.approx(0.475 * SQ2)
    sol, ver = out["agents"]["solver"], out["agents"]["verifier"]
    assert (sol["mean"], sol["std"]) == pytest.approx((0.5, 0.5 * SQ2))
    # factor = (sigma_k^2 + (mu_k - mu)^2) / sigma^2
    assert sol["factor"] == pytest.approx((0.5 + 0.025**2) / 0.45125)
    assert ver["factor"] == pytest.approx((0.405 + 0.025**2) / 0.45125)
    assert sol["n_groups"] == ver["n_groups"] == out["global"]["n_groups"] == 1


def test_group_stats_skips_uninformative_groups():
    scores = HAND["scores"] + [1.0, 1.0] + [0.3, 0.7]
    uid = HAND["uid"] + ["flat", "flat"] + ["r", "r"]
    traj = HAND["traj_uid"] + [0, 1] + [0, 1]
    agent = HAND["agent"] + ["solver", "solver"] + ["solver", "solver"]
    out = group_stats(scores, uid, traj, agent)
    # "flat" has sigma = 0: skipped; "r" counts for the solver only (no verifier rows)
    assert out["global"]["n_groups"] == 2
    assert out["agents"]["solver"]["n_groups"] == 2
    assert out["agents"]["verifier"]["n_groups"] == 1
    # in "r" the solver is the only agent: its factor is exactly 1
    expected = ((0.5 + 0.025**2) / 0.45125 + 1.0) / 2
    assert out["agents"]["solver"]["factor"] == pytest.approx(expected)
    lonely = group_stats([1.0, 0.0], ["q", "q"], [0, 1], ["s", "v"])
    assert lonely["agents"]["s"]["n_groups"] == 0 and math.isnan(lonely["agents"]["s"]["factor"])
