"""Loss balancing by agent frequency (upstream's `algorithm.balance_loss_by_agent_freq`).

An agent called several times per episode (a Verifier in a loop, a Searcher every turn)
contributes several rows to the loss of its prompt group, an agent called once contributes
one: by row count alone the first dominates the gradient. The balance weight of a row is
1 / n, n being the rows of its (uid, agent) pool in the batch, so every (prompt group,
agent) pool carries the same total weight; the weights are then divided by their batch mean
(the mean weight is 1, so the loss scale, and with it the effective learning rate, stays
that of the unweighted loss). The weight multiplies the row's per-token policy-gradient
losses (`drmas/algos/loss.py`, `row_weights`).

The weights depend only on which rows exist, not on their scores, so they combine with
every advantage estimator (the paper's 2 x 2 of normalisation x balancing). They are
computed on the whole batch, in the driver, as upstream does: the normalising mean is over
the rows of every worker group.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from drmas.algos.advantages import dense_codes


def loss_balance_weights(uid: Sequence, agent: Sequence) -> np.ndarray:
    """Per-row weights (N,), float64: (1 / n_(uid, agent)) / mean over rows of the same."""
    if len(uid) != len(agent):
        raise ValueError(f"uid and agent differ in length: {len(uid)}, {len(agent)}")
    if len(uid) == 0:
        return np.zeros(0)
    u, a = dense_codes(uid), dense_codes(agent)
    pool = u * (int(a.max()) + 1) + a
    _, inverse, counts = np.unique(pool, return_inverse=True, return_counts=True)
    raw = 1.0 / counts[inverse]
    return raw / raw.mean()
