"""GRPO advantage estimators for multi-agent rollouts: global (vanilla GRPO), agent-wise
(Dr. MAS) and the two mixed ablations.

Every rollout row is one agent call carrying ``(uid, traj_uid, agent, score)``. The upstream
code computes the baselines with a Python loop over rows holding torch scalars; here ids
become dense integer codes and the group statistics are segment sums, so 10^6 rows take
about 0.1-0.2 s on 2 cores (`drmas perf advantages`). See DESIGN.md, "Upstream semantics
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

from drmas.errors import ConfigError

#: method name -> (mean_by, std_by): which pool supplies the baseline and the scale.
METHODS = {
    "grpo": ("global", "global"),
    "drmas": ("agent", "agent"),
    "mean_agent_std_global": ("agent", "global"),
    "mean_global_std_agent": ("global", "agent"),
}
POOLS = ("global", "agent")


def method_modes(method: str) -> tuple[str, str]:
    """Return ``(mean_by, std_by)`` for a method name; ConfigError if the name is unknown."""
    try:
        return METHODS[method]
    except KeyError:
        raise ConfigError(
            f"unknown advantage method {method!r}; valid: {', '.join(sorted(METHODS))}"
        ) from None


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


def group_stats(scores, uid, traj_uid, agent) -> dict:
    """Per-agent reward statistics and the predicted GRPO gradient-scale factor.

    Per uid: agent k's pool (its rows' own scores) gives mu_k, sigma_k; the global pool
    (one mean per trajectory) gives mu, sigma; factor_k = (sigma_k^2 + (mu_k - mu)^2) /
    sigma^2, the second moment of agent k's advantages under the global baseline.
    Stds are unbiased, as in the advantages.

    Averaging: only uids whose global pool has >= 2 trajectories and sigma > 0 count
    (zero-variance groups give zero advantage under GRPO, so they shape no gradient);
    for agent k additionally its pool must hold >= 2 values. Each reported number is the
    plain mean of the per-uid numbers over those uids and ``n_groups`` says how many; with
    ``n_groups == 0`` the numbers are NaN (nothing to estimate from), never otherwise.
    """
    pools = _Pools(scores, uid, traj_uid, agent)
    if len(pools.scores) == 0:
        return {"agents": {}, "global": _summary({"mean": (), "std": ()})}
    (g_cnt, g_mu, g_sd), _ = pools.uid_stats()
    informative = (g_cnt >= 2) & (g_sd > 0)
    (k_cnt, k_mu, k_sd), _, ka_uid, ka_agent = pools.agent_stats()
    sigma = np.where(informative, g_sd, 1.0)[ka_uid]
    factor = (k_sd**2 + (k_mu - g_mu[ka_uid]) ** 2) / sigma**2
    usable = informative[ka_uid] & (k_cnt >= 2)
    agents = {}
    for code, name in enumerate(pools._agent_codes[1]):
        sel = usable & (ka_agent == code)
        agents[str(name)] = _summary({"mean": k_mu[sel], "std": k_sd[sel], "factor": factor[sel]})
    glob = _summary({"mean": g_mu[informative], "std": g_sd[informative]})
    return {"agents": agents, "global": glob}


def _summary(values: dict) -> dict:
    n = len(next(iter(values.values())))
    out = {k: float(np.mean(v)) if n else float("nan") for k, v in values.items()}
    out["n_groups"] = n
    return out
