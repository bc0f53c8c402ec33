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
    score, key_m, mu, _ = row_pools[mean_by]
    _, key_s, _, sd = row_pools[std_by]
    adv = score - mu[key_m]
    if norm_by_std:
        adv /= (sd + eps)[key_s]
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

    ``inflation`` is the second moment of agent k's advantages under the global baseline,
    i.e. the factor on the square of its gradient scale (see `compute_advantages`). Per
    agent this returns upstream's summaries (`summarize_group_diagnostics` of the paper's
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
