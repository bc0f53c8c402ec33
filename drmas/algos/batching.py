"""Upstream's two batch-handling steps on a worker group's rows, as row indices: padding the
rows with copies of themselves to a multiple of a size, and dealing them to the group's
data-parallel ranks with similar token counts. Both run in upstream's trainer on each worker
group's part of the batch before advantages are computed, so they decide which rows the
pools and the loss see and in which order (ARCHITECTURE.md, "Where drmas departs from
upstream"). The trainer applies them behind `train.pad_group_rows_to` and
`train.balance_batch` (drmas/train/trainer.py); off, it calls neither.

- `copy_indices`: the paper's fork's `adjust_batch(mode="copy")`
  (agent_system/multi_turn_rollout/utils.py): a group of n rows, n not a multiple of the
  divisor d, gets d - n % d more rows, whole copies of the group while at least n are
  missing, then `choice(n, rest, replace=False)` distinct rows drawn at random. A copy is the
  row itself (uid, trajectory, agent, response, score): it counts again in every pool and in
  the loss.
- `balanced_partitions`: verl's `get_seqlen_balanced_partitions(..., equal_size=True)`
  (verl/utils/seqlen_balancing.py), the Karmarkar-Karp largest differencing method over the
  rows' sequence lengths (prompt + response tokens) into k parts of n / k rows each; its
  `_balance_batch` reorders the group's rows to the parts concatenated, rank r then receiving
  the r-th contiguous share (`balanced_order`). One part keeps the rows' order.
- `upstream_batch_order`: the order of the whole batch's rows when upstream computes
  advantages, worker group after worker group.

Pure numpy and Python: no torch.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np


def copy_indices(n_rows: int, multiple: int, rng: np.random.RandomState) -> np.ndarray:
    """The rows that upstream's `adjust_batch(mode="copy")` appends to a group of `n_rows`
    rows so that their number becomes a multiple of `multiple`, in the order appended: every
    row once per whole copy of the group, then `rng.choice(n_rows, rest, replace=False)`.
    `rng` is a legacy `numpy.random.RandomState`, the generator behind upstream's
    `np.random.choice`: seeded alike, both draw the same rows. Nothing is drawn when no copy
    is needed (a multiple already, `multiple` 0, or no rows)."""
    if multiple < 0:
        raise ValueError(f"multiple must be >= 0, got {multiple}")
    missing = (-n_rows) % multiple if multiple and n_rows else 0
    if missing == 0:
        return np.zeros(0, dtype=np.int64)
    whole, rest = divmod(missing, n_rows)
    parts = [np.arange(n_rows, dtype=np.int64)] * whole
    if rest:
        parts.append(np.asarray(rng.choice(n_rows, rest, replace=False), dtype=np.int64))
    return np.concatenate(parts)


class _Part:
    """One part of a partial partition: its length sum and its (index, length) items in the
    order added. Ordered as verl's `Set`: by sum, then item count, then the items."""

    __slots__ = ("total", "items")

    def __init__(self, items: list[tuple[int, int]]):
        self.items = items
        self.total = sum(length for _, length in items)

    def key(self):
        return self.total, len(self.items), self.items


class _Partition:
    """k parts, largest first (verl's `State`). In the heap the partition with the largest
    spread comes out first, on a tie the one whose largest part is larger."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[_Part]):
        self.parts = sorted(parts, key=_Part.key, reverse=True)

    @property
    def spread(self) -> int:
        return self.parts[0].total - self.parts[-1].total

    def __lt__(self, other: "_Partition") -> bool:
        if self.spread != other.spread:
            return self.spread > other.spread
        return self.parts[0].key() > other.parts[0].key()

    def merge(self, other: "_Partition") -> None:
        """Largest part with the other's smallest, and so on (the differencing step)."""
        for mine, theirs in zip(self.parts, reversed(other.parts)):
            mine.items = mine.items + theirs.items
            mine.total += theirs.total
        self.parts.sort(key=_Part.key, reverse=True)


def balanced_partitions(lengths: Sequence[int], k: int) -> list[list[int]]:
    """The row indices of each of the `k` ranks, sorted, `len(lengths) / k` rows each, with
    similar sums of `lengths`: verl's `get_seqlen_balanced_partitions(lengths, k,
    equal_size=True)`, tie-breaking included. The rows sorted by (length, index) are taken k
    at a time, each such group a partition of k one-row parts; the two partitions of largest
    spread are merged, the largest part of one with the smallest of the other, until one is
    left. `len(lengths)` must be a multiple of k (verl asserts it; upstream pads the group's
    rows first)."""
    n = len(lengths)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if n == 0 or n % k:
        raise ValueError(f"{n} rows cannot be dealt to {k} ranks in equal shares")
    ranked = sorted((int(length), i) for i, length in enumerate(lengths))
    heap: list[_Partition] = []
    for s in range(0, n, k):     # pushed one by one, as verl does
        heapq.heappush(heap, _Partition([_Part([(i, length)]) for length, i in ranked[s:s + k]]))
    while len(heap) > 1:
        first, second = heapq.heappop(heap), heapq.heappop(heap)
        first.merge(second)
        heapq.heappush(heap, first)
    return [sorted(i for i, _ in part.items) for part in heap[0].parts]


def balanced_order(lengths: Sequence[int], k: int) -> np.ndarray:
    """The rows in the order verl's `_balance_batch` leaves them: rank 0's partition, then
    rank 1's, ... (`balanced_partitions`); with k = 1 the rows' own order."""
    if k == 1:
        return np.arange(len(lengths), dtype=np.int64)
    return np.fromiter((i for part in balanced_partitions(lengths, k) for i in part),
                       dtype=np.int64, count=len(lengths))


def upstream_batch_order(rows: list[dict], groups: list[str]) -> np.ndarray:
    """The row indices in the order upstream's batch holds them when it computes advantages
    (one GPU per worker group): its rollout gathers each trajectory's calls in turn order,
    trajectory after trajectory (as the trainer's `episode_rows`), then splits the batch by
    worker group and concatenates the groups in the order of their first agent
    (`combine_batches`). Only estimators that read a trajectory's first row (``grpo_2025``)
    depend on it; with one shared group it is the rows' own order. Upstream's `adjust_batch` appends copies to each
    group's rows and, with several GPUs, `balance_batch` reorders them by length; with
    `train.pad_group_rows_to` and `train.balance_batch` the trainer does both to `rows`
    first (`pad_group_rows`, `balance_group_rows` in drmas/train/trainer.py), and this order
    follows. Here rather than in the trainer so that `drmas predict` (drmas/report/lemma_batch.py)
    orders a batch the same way without importing the training stack."""
    rank = {g: i for i, g in enumerate(groups)}
    return np.argsort(np.fromiter((rank[r["group"]] for r in rows), np.int64, len(rows)),
                      kind="stable")
