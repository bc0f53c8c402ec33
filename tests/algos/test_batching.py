"""Upstream's batch handling on a worker group's rows (drmas/algos/batching.py) against
transcriptions of upstream's code:

- `adjust_batch(mode="copy")`, agent_system/multi_turn_rollout/utils.py of langfengQ/DrMAS
  (lines 286-355 at 19c632b, 282-336 at 3b556f2: the copy branch is the same, only the
  divisor's terms changed), on a stand-in for verl's DataProto (a dict of numpy columns). Upstream draws with NumPy's global
  legacy generator, `np.random.choice`; `copy_indices` takes a `RandomState`, the same
  generator, so seeded alike both pick exactly the same copies in the same order.
- `get_seqlen_balanced_partitions(..., equal_size=True)` and its Karmarkar-Karp, verl/utils/
  seqlen_balancing.py lines 23-184 (the same at 3b556f2 and 19c632b), and the reorder of
  `_balance_batch` (verl/trainer/ppo/ray_trainer.py:1098 at 19c632b), compared partition for partition on
  random lengths, ties included (lengths drawn from a few values)."""

import copy
import heapq

import numpy as np
import pytest

from drmas.algos.batching import balanced_order, balanced_partitions, copy_indices


# -- upstream's adjust_batch, copy mode ---------------------------------------------------
class Proto:
    """What adjust_batch uses of verl's DataProto: len, select_idxs, concat."""

    def __init__(self, columns: dict):
        self.columns = columns

    def __len__(self):
        return len(next(iter(self.columns.values())))

    def select_idxs(self, idxs):
        return Proto({k: v[idxs] for k, v in self.columns.items()})

    @staticmethod
    def concat(protos):
        return Proto({k: np.concatenate([p.columns[k] for p in protos]) for k in protos[0].columns})


def upstream_adjust_batch_copy(data: Proto, size_divisor: int) -> Proto:
    """adjust_batch(config, data, wg_id, mode="copy") once its size_divisor is known (the lcm
    of the log-prob and actor micro-batch sizes times the GPU count: 32 on math, 128 on
    search in the paper's scripts), its adaptive mini-batch bookkeeping left out."""
    bs = len(data)
    remainder = bs % size_divisor
    if remainder == 0:
        adjusted_batch = data
    else:
        to_add = size_divisor - remainder
        dup_protos = []
        remaining = to_add
        while remaining > 0:
            if remaining >= bs:
                dup_protos.append(data)
                remaining -= bs
            else:
                dup_indices = np.random.choice(bs, remaining, replace=False)
                dup_protos.append(data.select_idxs(dup_indices))
                remaining = 0
        adjusted_batch = Proto.concat([data] + dup_protos)
    return adjusted_batch


def random_group(rng, n):
    """A worker group's rows as upstream's columns: uid, traj_uid, agent, score, and the
    row's own index to follow which rows were copied."""
    return Proto({"row": np.arange(n), "uid": rng.integers(0, 4, n).astype(str),
                  "traj_uid": rng.integers(0, 8, n), "agent": rng.choice(["a", "b"], n),
                  "score": rng.random(n)})


@pytest.mark.parametrize("trial", range(40))
def test_copies_are_upstreams_given_the_same_generator_state(trial):
    rng = np.random.default_rng(trial)
    n = int(rng.integers(1, 300))
    multiple = int(rng.choice([1, 4, 32, 128, 500]))
    data = random_group(rng, n)
    seed = 1000 + trial
    np.random.seed(seed)
    want = upstream_adjust_batch_copy(data, multiple)
    idx = copy_indices(n, multiple, np.random.RandomState(seed))
    got = Proto.concat([data, data.select_idxs(idx)])
    for key in data.columns:
        np.testing.assert_array_equal(got.columns[key], want.columns[key])
    assert len(got) % multiple == 0 and len(got) - n < multiple


def test_whole_copies_of_a_small_group_come_before_the_drawn_rest():
    """Upstream copies the whole group while at least a group's worth is missing."""
    idx = copy_indices(3, 32, np.random.RandomState(0))      # 29 = 9 x 3 + 2 missing
    assert len(idx) == 29
    np.testing.assert_array_equal(idx[:27], np.tile(np.arange(3), 9))
    assert len(set(idx[27:].tolist())) == 2


def test_no_copy_draws_no_random_number():
    for n, multiple in ((64, 32), (5, 0), (0, 32), (7, 1)):
        rng = np.random.RandomState(3)
        before = rng.get_state()[1].copy()
        assert copy_indices(n, multiple, rng).size == 0
        np.testing.assert_array_equal(rng.get_state()[1], before)
    with pytest.raises(ValueError):
        copy_indices(5, -1, np.random.RandomState(0))


# -- verl's Karmarkar-Karp ------------------------------------------------------------------
def verl_karmarkar_karp(seqlen_list, k_partitions, equal_size):
    class Set:
        def __init__(self) -> None:
            self.sum = 0
            self.items = []

        def add(self, idx, val):
            self.items.append((idx, val))
            self.sum += val

        def merge(self, other):
            for idx, val in other.items:
                self.items.append((idx, val))
                self.sum += val

        def __lt__(self, other):
            if self.sum != other.sum:
                return self.sum < other.sum
            if len(self.items) != len(other.items):
                return len(self.items) < len(other.items)
            return self.items < other.items

    class State:
        def __init__(self, items, k) -> None:
            self.k = k
            self.sets = [Set() for _ in range(k)]
            assert len(items) in [1, k]
            for i, (idx, seqlen) in enumerate(items):
                self.sets[i].add(idx=idx, val=seqlen)
            self.sets = sorted(self.sets, reverse=True)

        def get_partitions(self):
            return [[idx for idx, _ in s.items] for s in self.sets]

        def merge(self, other):
            for i in range(self.k):
                self.sets[i].merge(other.sets[self.k - 1 - i])
            self.sets = sorted(self.sets, reverse=True)

        @property
        def spread(self):
            return self.sets[0].sum - self.sets[-1].sum

        def __lt__(self, other):
            if self.spread != other.spread:
                return self.spread > other.spread
            return self.sets[0] > other.sets[0]

    sorted_seqlen_list = sorted([(seqlen, i) for i, seqlen in enumerate(seqlen_list)])
    states_pq = []
    if equal_size:
        assert len(seqlen_list) % k_partitions == 0
        for offset in range(0, len(sorted_seqlen_list), k_partitions):
            items = []
            for i in range(k_partitions):
                seqlen, idx = sorted_seqlen_list[offset + i]
                items.append((idx, seqlen))
            heapq.heappush(states_pq, State(items=items, k=k_partitions))
    else:
        for seqlen, idx in sorted_seqlen_list:
            heapq.heappush(states_pq, State(items=[(idx, seqlen)], k=k_partitions))
    while len(states_pq) > 1:
        state0 = heapq.heappop(states_pq)
        state1 = heapq.heappop(states_pq)
        state0.merge(state1)
        heapq.heappush(states_pq, state0)
    return states_pq[0].get_partitions()


def verl_get_seqlen_balanced_partitions(seqlen_list, k_partitions, equal_size):
    assert len(seqlen_list) >= k_partitions
    partitions = verl_karmarkar_karp(seqlen_list=seqlen_list, k_partitions=k_partitions,
                                     equal_size=equal_size)
    assert len(partitions) == k_partitions
    seen = set()
    out = [None] * k_partitions
    for i, partition in enumerate(partitions):
        assert len(partition) > 0
        seen.update(partition)
        out[i] = sorted(partition)
    assert seen == set(range(len(seqlen_list)))
    return out


def verl_balance_batch_order(seqlen_list, world_size):
    """`_balance_batch`'s reorder index: the partitions concatenated."""
    parts = verl_get_seqlen_balanced_partitions(seqlen_list, k_partitions=world_size, equal_size=True)
    return [j for partition in parts for j in partition]


@pytest.mark.parametrize("trial", range(60))
def test_partitions_are_verls_on_random_lengths(trial):
    rng = np.random.default_rng(trial)
    k = int(rng.choice([1, 2, 3, 4, 8]))
    n = k * int(rng.integers(1, 40))
    # few distinct lengths in every other trial: ties in lengths, sums and spreads
    high = 6 if trial % 2 else 5000
    lengths = rng.integers(1, high, n).tolist()
    want = verl_get_seqlen_balanced_partitions(copy.copy(lengths), k, True)
    assert balanced_partitions(lengths, k) == want
    assert balanced_order(lengths, k).tolist() == verl_balance_batch_order(lengths, k)


def test_one_worker_keeps_the_order_and_shares_are_equal_and_balanced():
    lengths = [5, 900, 7, 300, 301, 2, 40, 41]
    assert balanced_order(lengths, 1).tolist() == list(range(8))
    parts = balanced_partitions(lengths, 2)
    assert [len(p) for p in parts] == [4, 4]
    sums = [sum(lengths[i] for i in p) for p in parts]
    assert max(sums) - min(sums) <= max(lengths)
    for bad in ((lengths, 3), ([], 2), (lengths, 0)):
        with pytest.raises(ValueError):
            balanced_partitions(*bad)
