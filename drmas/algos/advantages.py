"""Advantages for multi-agent rollouts by a registered estimator (drmas/algos/estimators.py),
and Lemma 4.2's diagnostics of a batch: how far a prompt-group baseline sits from each agent.

Every rollout row is one agent call carrying ``(uid, traj_uid, agent, score)``, in batch order;
the pools are dense codes and segment sums (drmas/algos/pools.py). See ARCHITECTURE.md,
"Upstream semantics to match exactly". The results are torch tensors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from drmas.algos.estimators import POOLS, Estimator, pool_estimator
from drmas.algos.pools import Pools, convention, dense_codes, normalised
from drmas.errors import ConfigError
from drmas.registry import ESTIMATORS

__all__ = ["compute_advantages", "dense_codes", "lemma_diagnostics", "lemma_prediction",
           "offset_advantages", "pool_std_fractions"]


def compute_advantages(
    scores,
    uid: Sequence,
    traj_uid: Sequence,
    agent: Sequence,
    *,
    estimator: str | Estimator | None = None,
    mean_by: str | None = None,
    std_by: str | None = None,
    norm_by_std: bool = True,
    eps: float = 1e-6,
    order: Sequence[int] | None = None,
) -> torch.Tensor:
    """Group-normalised advantages, one per row in batch order, shape (N,), float32.

    ``estimator`` names a registered estimator (``grpo``, ``grpo_2025``, ``drmas``, the
    ablations; drmas/algos/estimators.py). Without it, ``mean_by``/``std_by`` pick the pools
    directly (default ``"global"`` for both: ``grpo``): ``"global"`` pools per uid one value
    per trajectory (the mean of its rows' scores) and a row's score is its trajectory mean;
    ``"agent"`` pools per (uid, agent) every row's own score; ``"first_row"`` pools per uid
    each trajectory's first row in batch order, rows keep their own scores. The score used
    follows ``mean_by``. A = (score - mu) / (sd + eps), or score - mu without
    ``norm_by_std``; a pool of one value has mu = 0, sd = 1.

    Why the agent pool: under the global baseline agent k's normalised advantages have
    second moment E[(r_k - mu)^2] / sigma^2 = (sigma_k^2 + (mu_k - mu)^2) / sigma^2, and
    that factor scales agent k's policy-gradient norm: an agent whose reward distribution
    sits away from the pooled one gets inflated, spiky gradients. Normalising with the
    agent's own (mu_k, sigma_k) makes the second moment 1 for every agent.

    Statistics are computed in float64: zero-variance pools then give advantages of ~1e-10
    instead of float32 rounding noise divided by eps. The result lies on ``scores``' device
    when ``scores`` is a tensor, else on the CPU. ``order``: when the rows are not in batch
    order, the row indices in batch order (`Pools`); only first-row pools read it.
    """
    fn = _estimator_fn(estimator, mean_by, std_by)
    device = scores.device if isinstance(scores, torch.Tensor) else torch.device("cpu")
    pools = Pools(scores, uid, traj_uid, agent, order)
    if len(pools.scores) == 0:
        return torch.zeros(0, dtype=torch.float32, device=device)
    adv = fn(pools, norm_by_std=norm_by_std, eps=eps)
    return torch.from_numpy(np.asarray(adv, dtype=np.float64).astype(np.float32)).to(device)


def _estimator_fn(estimator, mean_by, std_by):
    if estimator is not None:
        if mean_by is not None or std_by is not None:
            raise ValueError("give an estimator or mean_by/std_by, not both")
        return (estimator if isinstance(estimator, Estimator) else ESTIMATORS.get(estimator)).fn
    mean_by, std_by = mean_by or "global", std_by or "global"
    for name, mode in (("mean_by", mean_by), ("std_by", std_by)):
        if mode not in POOLS:
            raise ConfigError(f"unknown {name} {mode!r}; valid: {', '.join(POOLS)}")
    return pool_estimator(mean_by, std_by)


def offset_advantages(scores, uid: Sequence, traj_uid: Sequence, agent: Sequence, *,
                      norm_by_std: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """The offset-only advantages of the paired measurement, one per row, shape (N,), float32:
    (mu_k - mu) / (sd + eps), with mu_k the row's (uid, agent) pool mean of rows' own scores
    (Dr. MAS's baseline) and mu, sd the uid pool's mean and std of trajectory means (GRPO's);
    mu_k - mu without ``norm_by_std``. It isolates Lemma 4.2's mean-gap term: the difference of
    the agent-mean and global-mean baselines on GRPO's scale. A pool of one value has mu = 0,
    sd = 1, as in ``compute_advantages``.
    """
    device = scores.device if isinstance(scores, torch.Tensor) else torch.device("cpu")
    pools = Pools(scores, uid, traj_uid, agent)
    if len(pools.scores) == 0:
        return torch.zeros(0, dtype=torch.float32, device=device)
    _, key_a, mu_a, _ = pools.row_pool("agent")
    _, key_g, mu_g, sd_g = pools.row_pool("global")
    adv = mu_a[key_a] - mu_g[key_g]
    if norm_by_std:
        adv /= (sd_g + eps)[key_g]
    return torch.from_numpy(adv.astype(np.float32)).to(device)


#: Lemma 4.2 statistics per agent, in upstream's order and under upstream's names
#: (``adv_diag/<agent>/<name>`` in metrics.jsonl and TensorBoard), plus ``num_groups``.
DIAG_KEYS = ("mean_gap_mean", "mean_gap_abs_mean", "mean_gap_abs_max", "var_ratio_mean",
             "var_ratio_min", "var_ratio_max", "inflation_factor_mean", "inflation_factor_p95",
             "inflation_factor_max")
_DIAG_FLOOR = 1e-12        # upstream's guard in sigma^2 + 1e-12


def lemma_diagnostics(scores, uid, traj_uid, agent, *, informative_only: bool = True) -> dict:
    """Lemma 4.2 diagnostics per agent: how far GRPO's global baseline sits from each agent.

    For every (uid, agent) group, with (mu_k, sigma_k) over the agent's rows' own scores (the
    Dr. MAS pool) and (mu, sigma) over the uid's trajectory means (the GRPO pool), both
    computed whatever the run trains with:

        mean_gap  = mu_k - mu
        var_ratio = sigma_k^2 / sigma^2
        inflation = (sigma_k^2 + mean_gap^2) / sigma^2

    Kept, under upstream's names, for comparison with upstream's logs; it is not the
    prediction to compare gradients with (that is `lemma_prediction`). It mixes two scores:
    (mu_k, sigma_k) over the rows' own scores, (mu, sigma) over trajectory means, whereas GRPO
    trains every row on its trajectory mean. With per-row format penalties (score = reward -
    penalty x (1 - valid)) in a prompt group of constant team reward, sigma comes only from
    the penalties averaged over a trajectory's rows and sigma_k from the agent's own, so
    ``inflation`` reads >> 1 where GRPO's advantages have second moment <= 1. Also: the
    summaries are unweighted over groups (a group of 2 rows counts as one of 20) and heavy
    tailed, and the filter sigma > 0 below lets round-off through (trajectory means equal up
    to an ulp give a factor of ~1e7). Per agent this returns upstream's summaries (`summarize_group_diagnostics` of the paper's
    code): mean_gap mean / abs mean / abs max, var_ratio mean / min / max, inflation mean /
    p95 / max, and ``num_groups``; an agent without groups gets ``{"num_groups": 0}``.

    ``informative_only`` (default) keeps the groups where the lemma's quantities exist: the
    uid holds >= 2 trajectories with sigma > 0 and the agent >= 2 rows. A zero-variance uid
    gives every row a zero GRPO advantage (no gradient to inflate), and upstream's pool-of-one
    convention (mu_k = 0, sigma_k = 1) is not a statistic of the agent: with
    ``informative_only=False`` both enter exactly as in the paper's code (every group, that
    convention, sigma^2 + 1e-12 below), which reports inflation of ~1e12 for them.
    """
    pools = Pools(scores, uid, traj_uid, agent)
    if len(pools.scores) == 0:
        return {}
    (g_cnt, g_mu, g_sd), _ = pools.uid_stats()
    (k_cnt, k_mu, k_sd), _, ka_uid, ka_agent = pools.agent_stats()
    if informative_only:
        keep = ((g_cnt >= 2) & (g_sd > 0))[ka_uid] & (k_cnt >= 2)
    else:
        keep = np.ones(len(k_cnt), dtype=bool)
        g_mu, g_sd = convention(g_cnt, g_mu, g_sd)
        k_mu, k_sd = convention(k_cnt, k_mu, k_sd)
    gap = k_mu - g_mu[ka_uid]
    sigma2 = g_sd[ka_uid] ** 2 + _DIAG_FLOOR
    var_ratio = k_sd**2 / sigma2
    inflation = (k_sd**2 + gap**2) / sigma2
    out = {}
    for code, name in enumerate(pools.agent_codes[1]):
        sel = keep & (ka_agent == code)
        if not sel.any():
            out[str(name)] = {"num_groups": 0}
            continue
        g, v, f = gap[sel], var_ratio[sel], inflation[sel]
        values = (g.mean(), np.abs(g).mean(), np.abs(g).max(), v.mean(), v.min(), v.max(),
                  f.mean(), np.percentile(f, 95), f.max())
        out[str(name)] = {**dict(zip(DIAG_KEYS, map(float, values))), "num_groups": int(sel.sum())}
    return out


#: a uid's (or pool's) std at most this times its largest |score| is round-off, not spread:
#: trajectory means of the same rows summed in another order differ by an ulp (~1e-16), a
#: format penalty or a KL term differs by >= 1e-8 of the reward's scale
ROUNDOFF_RTOL = 1e-9


def _uid_tolerance(pools: Pools) -> np.ndarray:
    """Per uid: the std below which its values are equal up to round-off."""
    scale = np.zeros(pools.n_uid)
    np.maximum.at(scale, pools.u, np.abs(pools.scores))
    return ROUNDOFF_RTOL * scale


def _as_trained(adv: np.ndarray) -> np.ndarray:
    """The float32 values `compute_advantages` hands the update, back in float64."""
    return adv.astype(np.float32).astype(np.float64)


def lemma_prediction(scores, uid, traj_uid, agent, *, norm_by_std: bool = True,
                     eps: float = 1e-6, estimators: Sequence[str] | None = None,
                     order: Sequence[int] | None = None) -> dict:
    """Per agent: what Lemma 4.2 predicts for the ratio of its squared gradient norms, a
    prompt-group estimator (GRPO, and each other registered estimator with a ``baseline``)
    over Dr. MAS, on this very batch, and the lemma's factor computed from what that estimator
    normalises. Logged as ``adv_diag/<agent>/<key>`` beside upstream's `lemma_diagnostics`.
    ``estimators``: the baseline estimators to predict for (default: every registered one);
    ``order``: the batch order when the rows are not in it (`Pools`). Keys for ``grpo``
    (another estimator E adds the same keys with ``_E`` appended, ``E_adv_sq`` for the first):

    - ``grpo_adv_sq``, ``drmas_adv_sq``: mean over the agent's rows of the squared advantage
      `compute_advantages` gives it with the estimator's pools (GRPO: global/global) and
      Dr. MAS's (agent/agent), ``norm_by_std`` and ``eps`` as the run trains: exactly what each
      estimator trains on (float32 values, the singleton convention included). One exception:
      rows of a pool (>= 2 values) whose std is round-off (`ROUNDOFF_RTOL`) count as 0, which
      they are in exact arithmetic (their trained values are round-off / eps, ~1e-10); a row
      whose own score differs from such a pool's mean (``grpo_2025``: a penalised row beside
      constant first rows) keeps its trained value, (score - mu) / eps.
    - ``predicted_ratio``: sum over the agent's rows of A_grpo^2 / sum of A_drmas^2 (None
      when the denominator is 0). The policy gradient is sum_i A_i g_i over the agent's rows
      (g_i the score function of row i, the same for both estimators: same rows, ratio 1, same
      weights); if the g_i are orthogonal with equal norms, |sum_i A_i g_i|^2 = |g|^2 sum_i
      A_i^2, so this is exactly the GRPO / Dr. MAS ratio of squared gradient norms. It is
      what a same-batch gradient measurement tests.
    - ``lemma_factor``: the lemma's (sigma_k^2 + (mu_k - mu)^2) / sigma^2 for every (uid,
      agent) group, from what the estimator normalises: mu, sigma (unbiased) over the uid's
      pool (GRPO: trajectory means; ``grpo_2025``: the trajectories' first rows' scores);
      mu_k, sigma_k (population) over the scores the agent's rows train on in that uid (GRPO:
      their trajectory means; ``grpo_2025``: their own). Then it is the mean over the agent's
      rows of ((x_i - mu) / sigma)^2, the second moment of its advantages in that group (up
      to eps). Averaged over groups weighted by the agent's rows (a mean over rows, as the
      gradient sums rows; an unweighted mean of ratios lets a 2-row group weigh as much as a
      20-row one), over informative groups only: the uid's pool has >= 2 values that spread
      by more than round-off (std > `ROUNDOFF_RTOL` x the uid's largest |score|; upstream's
      sigma > 0 lets means that differ by an ulp through, giving factors of 1e7). None
      without such groups. Independent of ``norm_by_std``: the lemma is about normalised
      advantages. It differs from ``predicted_ratio`` by Dr. MAS's side, which is not 1 per
      group: (n-1)/n for a pool of n rows, 0 for a constant pool, the raw score for a pool of
      one; and for ``grpo_2025`` by the groups it leaves out, those whose pool is constant,
      where a penalised row's advantage is -penalty / eps.
    - ``lemma_rows``: the agent's rows in informative groups; ``lemma_groups``: their number
      of (uid, agent) groups (not ``num_groups``, which is upstream's count, filtered
      differently, in the same ``adv_diag`` dict).
    """
    pools = Pools(scores, uid, traj_uid, agent, order)
    if len(pools.scores) == 0:
        return {}
    if estimators is None:
        estimators = [n for n, e in ESTIMATORS.entries().items() if e.baseline]
    (k_cnt, k_mu, k_sd), ka, ka_uid, ka_agent = pools.agent_stats()
    codes, names = pools.agent_codes
    n_agents = len(names)
    tol = _uid_tolerance(pools)
    drmas_pool = (pools.scores, ka, *convention(k_cnt, k_mu, k_sd))
    a_drmas = _as_trained(normalised(drmas_pool, drmas_pool, norm_by_std, eps))
    a_drmas[((k_cnt >= 2) & (k_sd <= tol[ka_uid]))[ka]] = 0.0
    rows = np.bincount(codes, minlength=n_agents)
    sq_drmas = np.bincount(codes, a_drmas * a_drmas, n_agents)
    out = {str(name): {"drmas_adv_sq": float(sq_drmas[c] / rows[c])}
           for c, name in enumerate(names)}
    for name in estimators:
        est = ESTIMATORS.get(name)
        if est.baseline is None:
            raise ValueError(f"estimator {name!r} has no prompt-group baseline to predict for")
        x, stats = _baseline_view(pools, est.baseline)
        sq, lemma_sum, lemma_rows, groups = _baseline_prediction(
            pools, x, stats, tol, (ka_uid, ka_agent), norm_by_std, eps)
        sfx = "" if name == "grpo" else f"_{name}"
        for c, agent_name in enumerate(names):
            out[str(agent_name)].update({
                f"{name}_adv_sq": float(sq[c] / rows[c]),
                f"predicted_ratio{sfx}": float(sq[c] / sq_drmas[c]) if sq_drmas[c] > 0 else None,
                f"lemma_factor{sfx}": float(lemma_sum[c] / lemma_rows[c]) if lemma_rows[c] else None,
                f"lemma_rows{sfx}": int(lemma_rows[c]), f"lemma_groups{sfx}": int(groups[c])})
    return out


def _baseline_view(pools: Pools, baseline: str):
    """(the score each row trains on, the uid pool's (count, mu, sd)) of a baseline pool."""
    if baseline == "global":
        stats, traj_rows = pools.uid_stats()
        return traj_rows, stats
    return pools.scores, pools.first_row_stats()


def _baseline_prediction(pools, x, stats, tol, agent_keys, norm_by_std, eps):
    """Per agent code: the sum of squared trained advantages, the lemma's sum and rows over
    informative groups, and the number of informative (uid, agent) groups."""
    u, codes = pools.u, pools.agent_codes[0]
    ka_uid, ka_agent = agent_keys
    n_agents = len(pools.agent_codes[1])
    g_cnt, g_mu, g_sd = stats
    pool = (x, u, *convention(g_cnt, g_mu, g_sd))
    adv = _as_trained(normalised(pool, pool, norm_by_std, eps))
    constant = ((g_cnt >= 2) & (g_sd <= tol))[u]
    # a pool value of a constant pool lies within sd * sqrt(n - 1) of its mean: round-off
    # over eps, zeroed; a row's own score farther away (grpo_2025) keeps its trained value
    adv[constant & (np.abs(x - g_mu[u]) <= tol[u] * np.sqrt(g_cnt[u]))] = 0.0
    informative = (g_cnt >= 2) & (g_sd > tol)
    row_in = informative[u]
    z = (x - g_mu[u]) / np.where(informative, g_sd, 1.0)[u]
    return (np.bincount(codes, adv * adv, n_agents),
            np.bincount(codes, np.where(row_in, z * z, 0.0), n_agents),
            np.bincount(codes, row_in, n_agents),
            np.bincount(ka_agent, informative[ka_uid], n_agents))


#: thresholds of `pool_std_fractions`, under the key names it logs
STD_THRESHOLDS = {"frac_below_1e-3": 1e-3, "frac_below_1e-2": 1e-2}


def pool_std_fractions(scores, uid, agent) -> dict:
    """Per agent: the share of its (uid, agent) pools whose std is below each threshold of
    `STD_THRESHOLDS`: how often Dr. MAS divides by a tiny std (``adv_std/<agent>/
    frac_below_*``).

    Upstream's definition (`summarize_group_std_stats` of the paper's code): every pool of
    the batch counts, a pool of one with upstream's std of 1 (so never below), the others
    with their unbiased std before ``eps``; strictly below; an unweighted share of pools.
    Upstream names the keys ``frac_below_0.001``, ``frac_below_0.01`` (and logs 0.1 too),
    and breaks them down by agent only in runs that train with agent pools; here they are
    the agent pools' whatever the run trains with, as `lemma_diagnostics`.
    """
    pools = Pools(scores, uid, uid, agent)        # trajectory ids are not needed here
    if len(pools.scores) == 0:
        return {}
    (k_cnt, _, k_sd), _, _, ka_agent = pools.agent_stats()
    sd = convention(k_cnt, np.zeros(len(k_cnt)), k_sd)[1]
    names = pools.agent_codes[1]
    n_pools = np.bincount(ka_agent, minlength=len(names))
    out = {}
    for key, threshold in STD_THRESHOLDS.items():
        below = np.bincount(ka_agent, sd < threshold, len(names))
        for c, name in enumerate(names):
            out.setdefault(str(name), {})[key] = float(below[c] / n_pools[c])
    return out
