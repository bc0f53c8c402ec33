"""GRPO advantage estimators for multi-agent rollouts: global (vanilla GRPO), agent-wise
(Dr. MAS) and the two mixed ablations.

Every rollout row is one agent call carrying ``(uid, traj_uid, agent, score)``. The upstream
code computes the baselines with a Python loop over rows holding torch scalars; here ids
become dense integer codes and the group statistics are segment sums, so 10^6 rows take
about 0.1-0.2 s on 2 cores (`drmas perf advantages`). See ARCHITECTURE.md, "Upstream semantics
to match exactly".

Implementation choices, measured on 10^6 rows here: ``pandas.factorize`` (hash table)
codes int arrays ~10x faster than ``torch.unique`` (sorts); a dict codes lists of strings
faster than either. Segment sums use ``numpy.bincount``: single-threaded, ~2 ms per 10^6
rows, whereas small torch ops paid ms-scale intra-op thread sync each on a busy 2-core box.
The result is a torch tensor.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from drmas.algos.estimators import POOLS
from drmas.errors import ConfigError

def dense_codes(ids, *, return_uniques: bool = False):
    """Map ids (list of str/int, numpy array or tensor) to int64 codes 0..k-1.

    Codes follow first appearance; only equality of ids matters. Arrays and lists of ints
    go through ``pandas.factorize``; other lists through a dict (~45 ms for 10^6 uuid
    strings, against 50-90 ms for ``pandas.factorize`` on an object array and ~150 ms for
    ``numpy.unique``). ``return_uniques`` also returns the id of each code.
    """
    if isinstance(ids, torch.Tensor):
        ids = ids.detach().cpu().numpy()
    if not isinstance(ids, np.ndarray) and len(ids) and _is_int(ids[0]):
        try:
            ids = np.fromiter(ids, dtype=np.int64, count=len(ids))
        except (TypeError, ValueError, OverflowError):
            pass  # not all ints after all: the dict path handles anything hashable
    if isinstance(ids, np.ndarray):
        if ids.ndim != 1:
            raise ValueError(f"ids must be one-dimensional, got shape {ids.shape}")
        codes, uniques = pd.factorize(ids, use_na_sentinel=False)
        codes = codes.astype(np.int64, copy=False)
        return (codes, list(uniques)) if return_uniques else codes
    index = {key: i for i, key in enumerate(dict.fromkeys(ids))}
    codes = np.fromiter(map(index.__getitem__, ids), dtype=np.int64, count=len(ids))
    return (codes, list(index)) if return_uniques else codes


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _pair_codes(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense codes of the pairs (a, b) of codes, and for each pair code its ``a`` code."""
    pair = pd.factorize(a * (int(b.max()) + 1) + b)[0].astype(np.int64, copy=False)
    owner = np.empty(int(pair.max()) + 1, dtype=np.int64)
    owner[pair] = a
    return pair, owner


def _segment_stats(values: np.ndarray, key: np.ndarray, n_keys: int):
    """Per-key count, mean and unbiased std (two-pass, so near-constant pools stay exact).

    A key with one value gets std 0 here; ``_convention`` applies the singleton rule.
    """
    cnt = np.bincount(key, minlength=n_keys)
    mean = np.bincount(key, values, n_keys) / np.maximum(cnt, 1)
    dev = values - mean[key]
    var = np.bincount(key, dev * dev, n_keys) / np.maximum(cnt - 1, 1)
    return cnt, mean, np.sqrt(var)


def _convention(cnt, mean, sd):
    """Upstream rule: a pool of one value has mu = 0 and sd = 1."""
    single = cnt == 1
    return np.where(single, 0.0, mean), np.where(single, 1.0, sd)


def _as_float64(scores) -> np.ndarray:
    if isinstance(scores, torch.Tensor):
        return scores.detach().to("cpu", torch.float64).reshape(-1).numpy()
    return np.asarray(scores, dtype=np.float64).reshape(-1)


class _Pools:
    """The two pools of one batch: per uid over trajectory means, and per (uid, agent).

    Ids are coded on first use: vanilla GRPO never needs the agent ids.
    """

    def __init__(self, scores, uid, traj_uid, agent):
        self.scores = _as_float64(scores)
        n = len(self.scores)
        if not (len(uid) == len(traj_uid) == len(agent) == n):
            raise ValueError(
                "scores, uid, traj_uid, agent differ in length: "
                f"{n}, {len(uid)}, {len(traj_uid)}, {len(agent)}"
            )
        self.u = dense_codes(uid)
        self.n_uid = int(self.u.max()) + 1 if n else 0
        self._traj_uid, self._agent = traj_uid, agent

    @functools.cached_property
    def _agent_codes(self):
        return dense_codes(self._agent, return_uniques=True)

    def uid_stats(self):
        """Per uid (count, mu, sd) over its trajectories' means; each row's traj mean."""
        # trajectories are keyed by (uid, traj_uid): traj ids are unique only within a uid
        tk, t_uid = _pair_codes(self.u, dense_codes(self._traj_uid))
        cnt = np.bincount(tk)
        traj_mean = np.bincount(tk, self.scores) / cnt
        return _segment_stats(traj_mean, t_uid, self.n_uid), traj_mean[tk]

    def agent_stats(self):
        """Per (uid, agent) key (count, mu, sd) of rows' own scores; row keys; key owners."""
        a = self._agent_codes[0]
        ka, ka_uid = _pair_codes(self.u, a)
        ka_agent = np.empty(len(ka_uid), dtype=np.int64)
        ka_agent[ka] = a
        return _segment_stats(self.scores, ka, len(ka_uid)), ka, ka_uid, ka_agent

    def row_pool(self, mode: str):
        """(row score, row -> pool key, per-key mu and sd after the singleton rule)."""
        if mode == "global":
            stats, row_score = self.uid_stats()
            key = self.u
        else:
            stats, key, _, _ = self.agent_stats()
            row_score = self.scores
        return (row_score, key, *_convention(*stats))


def compute_advantages(
    scores,
    uid: Sequence,
    traj_uid: Sequence,
    agent: Sequence,
    *,
    mean_by: str = "global",
    std_by: str = "global",
    norm_by_std: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Group-normalised advantages, one per row, shape (N,), float32.

    ``mean_by``/``std_by`` pick the pool for the baseline and for the scale:
    ``"global"`` pools per uid one value per trajectory (the mean of its rows' scores) and
    a row's score is its trajectory mean; ``"agent"`` pools per (uid, agent) every row's
    own score. The score used follows ``mean_by``. A = (score - mu) / (sd + eps), or
    score - mu without ``norm_by_std``; a pool of one value has mu = 0, sd = 1.

    Why the agent pool: under the global baseline agent k's normalised advantages have
    second moment E[(r_k - mu)^2] / sigma^2 = (sigma_k^2 + (mu_k - mu)^2) / sigma^2, and
    that factor scales agent k's policy-gradient norm: an agent whose reward distribution
    sits away from the pooled one gets inflated, spiky gradients. Normalising with the
    agent's own (mu_k, sigma_k) makes the second moment 1 for every agent.

    Statistics are computed in float64: zero-variance pools then give advantages of ~1e-10
    instead of float32 rounding noise divided by eps. The result lies on ``scores``' device
    when ``scores`` is a tensor, else on the CPU.
    """
    for name, mode in (("mean_by", mean_by), ("std_by", std_by)):
        if mode not in POOLS:
            raise ConfigError(f"unknown {name} {mode!r}; valid: {', '.join(POOLS)}")
    device = scores.device if isinstance(scores, torch.Tensor) else torch.device("cpu")
    pools = _Pools(scores, uid, traj_uid, agent)
    if len(pools.scores) == 0:
        return torch.zeros(0, dtype=torch.float32, device=device)
    row_pools = {mode: pools.row_pool(mode) for mode in {mean_by, std_by}}
    adv = _normalised(row_pools[mean_by], row_pools[std_by], norm_by_std, eps)
    return torch.from_numpy(adv.astype(np.float32)).to(device)


def _normalised(mean_pool, std_pool, norm_by_std: bool, eps: float) -> np.ndarray:
    """float64 advantages from two `_Pools.row_pool` tuples (the score follows the mean's)."""
    score, key_m, mu, _ = mean_pool
    _, key_s, _, sd = std_pool
    adv = score - mu[key_m]
    if norm_by_std:
        adv /= (sd + eps)[key_s]
    return adv


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
    pools = _Pools(scores, uid, traj_uid, agent)
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
    pools = _Pools(scores, uid, traj_uid, agent)
    if len(pools.scores) == 0:
        return {}
    (g_cnt, g_mu, g_sd), _ = pools.uid_stats()
    (k_cnt, k_mu, k_sd), _, ka_uid, ka_agent = pools.agent_stats()
    if informative_only:
        keep = ((g_cnt >= 2) & (g_sd > 0))[ka_uid] & (k_cnt >= 2)
    else:
        keep = np.ones(len(k_cnt), dtype=bool)
        g_mu, g_sd = _convention(g_cnt, g_mu, g_sd)
        k_mu, k_sd = _convention(k_cnt, k_mu, k_sd)
    gap = k_mu - g_mu[ka_uid]
    sigma2 = g_sd[ka_uid] ** 2 + _DIAG_FLOOR
    var_ratio = k_sd**2 / sigma2
    inflation = (k_sd**2 + gap**2) / sigma2
    out = {}
    for code, name in enumerate(pools._agent_codes[1]):
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


def _uid_tolerance(pools: _Pools) -> np.ndarray:
    """Per uid: the std below which its values are equal up to round-off."""
    scale = np.zeros(pools.n_uid)
    np.maximum.at(scale, pools.u, np.abs(pools.scores))
    return ROUNDOFF_RTOL * scale


def _as_trained(adv: np.ndarray) -> np.ndarray:
    """The float32 values `compute_advantages` hands the update, back in float64."""
    return adv.astype(np.float32).astype(np.float64)


def lemma_prediction(scores, uid, traj_uid, agent, *, norm_by_std: bool = True,
                     eps: float = 1e-6) -> dict:
    """Per agent: what Lemma 4.2 predicts for the ratio of its squared gradient norms, GRPO
    over Dr. MAS, on this very batch, and the lemma's factor computed from what GRPO
    normalises. Logged as ``adv_diag/<agent>/<key>`` beside upstream's `lemma_diagnostics`.

    - ``grpo_adv_sq``, ``drmas_adv_sq``: mean over the agent's rows of the squared advantage
      `compute_advantages` gives it with global/global (GRPO) and agent/agent (Dr. MAS)
      pools, ``norm_by_std`` and ``eps`` as the run trains: exactly what each estimator
      trains on (float32 values, the singleton convention included). One exception: rows of
      a pool (>= 2 values) whose std is round-off (`ROUNDOFF_RTOL`) count as 0, which they
      are in exact arithmetic (their trained values are round-off / eps, ~1e-10).
    - ``predicted_ratio``: sum over the agent's rows of A_grpo^2 / sum of A_drmas^2 (None
      when the denominator is 0). The policy gradient is sum_i A_i g_i over the agent's rows
      (g_i the score function of row i, the same for both estimators: same rows, ratio 1, same
      weights); if the g_i are orthogonal with equal norms, |sum_i A_i g_i|^2 = |g|^2 sum_i
      A_i^2, so this is exactly the GRPO / Dr. MAS ratio of squared gradient norms. It is
      what a same-batch gradient measurement tests.
    - ``lemma_factor``: the lemma's (sigma_k^2 + (mu_k - mu)^2) / sigma^2 for every (uid,
      agent) group, from what GRPO normalises: mu, sigma (unbiased, GRPO's) over the uid's
      trajectory means; mu_k, sigma_k (population) over the trajectory means of the agent's
      rows in that uid. Then it is the mean over the agent's rows of ((x_i - mu) / sigma)^2,
      the second moment of its GRPO advantages in that group (up to eps). Averaged over
      groups weighted by the agent's rows (a mean over rows, as the gradient sums rows; an
      unweighted mean of ratios lets a 2-row group weigh as much as a 20-row one), over
      informative groups only: the uid has >= 2 trajectories whose means spread by more than
      round-off (std > `ROUNDOFF_RTOL` x the uid's largest |score|; upstream's sigma > 0 lets
      means that differ by an ulp through, giving factors of 1e7). None without such groups.
      Independent of ``norm_by_std``: the lemma is about normalised advantages. It differs
      from ``predicted_ratio`` by Dr. MAS's side, which is not 1 per group: (n-1)/n for a
      pool of n rows, 0 for a constant pool, the raw score for a pool of one.
    - ``lemma_rows``: the agent's rows in informative groups; ``lemma_groups``: their number
      of (uid, agent) groups (not ``num_groups``, which is upstream's count, filtered
      differently, in the same ``adv_diag`` dict).
    """
    pools = _Pools(scores, uid, traj_uid, agent)
    if len(pools.scores) == 0:
        return {}
    u = pools.u
    (g_cnt, g_mu, g_sd), traj_rows = pools.uid_stats()
    (k_cnt, k_mu, k_sd), ka, ka_uid, ka_agent = pools.agent_stats()
    codes, names = pools._agent_codes
    tol = _uid_tolerance(pools)
    grpo_pool = (traj_rows, u, *_convention(g_cnt, g_mu, g_sd))
    drmas_pool = (pools.scores, ka, *_convention(k_cnt, k_mu, k_sd))
    a_grpo = _as_trained(_normalised(grpo_pool, grpo_pool, norm_by_std, eps))
    a_drmas = _as_trained(_normalised(drmas_pool, drmas_pool, norm_by_std, eps))
    a_grpo[((g_cnt >= 2) & (g_sd <= tol))[u]] = 0.0
    a_drmas[((k_cnt >= 2) & (k_sd <= tol[ka_uid]))[ka]] = 0.0
    informative = (g_cnt >= 2) & (g_sd > tol)
    row_in = informative[u]
    z = (traj_rows - g_mu[u]) / np.where(informative, g_sd, 1.0)[u]
    n_agents = len(names)
    rows = np.bincount(codes, minlength=n_agents)
    sq_grpo = np.bincount(codes, a_grpo * a_grpo, n_agents)
    sq_drmas = np.bincount(codes, a_drmas * a_drmas, n_agents)
    lemma_rows = np.bincount(codes, row_in, n_agents)
    lemma_sum = np.bincount(codes, np.where(row_in, z * z, 0.0), n_agents)
    groups = np.bincount(ka_agent, informative[ka_uid], n_agents)
    out = {}
    for c, name in enumerate(names):
        out[str(name)] = {
            "grpo_adv_sq": float(sq_grpo[c] / rows[c]),
            "drmas_adv_sq": float(sq_drmas[c] / rows[c]),
            "predicted_ratio": float(sq_grpo[c] / sq_drmas[c]) if sq_drmas[c] > 0 else None,
            "lemma_factor": float(lemma_sum[c] / lemma_rows[c]) if lemma_rows[c] else None,
            "lemma_rows": int(lemma_rows[c]), "lemma_groups": int(groups[c])}
    return out


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
    pools = _Pools(scores, uid, uid, agent)        # trajectory ids are not needed here
    if len(pools.scores) == 0:
        return {}
    (k_cnt, _, k_sd), _, _, ka_agent = pools.agent_stats()
    sd = _convention(k_cnt, np.zeros(len(k_cnt)), k_sd)[1]
    names = pools._agent_codes[1]
    n_pools = np.bincount(ka_agent, minlength=len(names))
    out = {}
    for key, threshold in STD_THRESHOLDS.items():
        below = np.bincount(ka_agent, sd < threshold, len(names))
        for c, name in enumerate(names):
            out.setdefault(str(name), {})[key] = float(below[c] / n_pools[c])
    return out
