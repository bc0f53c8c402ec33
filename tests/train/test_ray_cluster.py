"""Ray across nodes: a real two-node Ray cluster on this machine, a training run
whose worker groups span both nodes, and a worker node killed in the middle of a run.

The cluster is Ray's own `ray.cluster_utils.Cluster`: each node is the `Node` that
`ray start` runs (a GCS on the head, a raylet and an object store per node), but every
process is tracked by its node's object, so removing a node or the cluster kills exactly
those; `ray stop` would end every Ray of the machine's user, other people's jobs included.
Run with `python -m pytest -q -m cluster tests/train/test_ray_cluster.py`.
"""

import dataclasses
import shutil
import tempfile
import time

import pytest

from conftest import make_config
from drmas.config.profile import ResourceConfig
from drmas.errors import DrmasError
from drmas.train import checkpoint
from training import (equal_weights, final_weights, make_trainer, odd_length_reward,
                      run_trained, stripped)

pytestmark = pytest.mark.cluster

STEPS = 2
GROUPS = ("solver", "verifier")
# A node that stops answering is declared dead after 3 missed checks of 1 s (Ray's default
# is 5 of 3 s): the lost-node test waits seconds, not half a minute.
FAST_HEALTH = {"health_check_period_ms": 1000, "health_check_timeout_ms": 1000,
               "health_check_failure_threshold": 3}


@pytest.fixture(scope="module")
def ray_tmpdir():
    """RAY_TMPDIR for every Ray of this module, then removed: session files and the
    `ray_current_cluster` address file stay out of /tmp/ray, so nothing else on the machine
    joins these clusters by `address="auto"`, and another cluster's address file is neither
    overwritten nor deleted. One folder for the module, not one per cluster: Ray's event
    logger in the test process keeps writing under the first session's folder."""
    tmp = tempfile.mkdtemp(prefix="drmas-rc-")     # short: Ray's socket paths stay < 108 bytes
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_TMPDIR", tmp)
        mp.delenv("RAY_ADDRESS", raising=False)
        yield tmp
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def two_nodes(ray_tmpdir):
    """(cluster, worker node): a head and a worker node of 1 CPU each, with the custom
    resources "head" and "worker"; the runs join it by the head's explicit address. The
    driver connection and every node are gone afterwards, whatever the test did."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster()
    try:
        cluster.add_node(num_cpus=1, resources={"head": 1}, include_dashboard=False,
                         _system_config=FAST_HEALTH)
        worker = cluster.add_node(num_cpus=1, resources={"worker": 1})
        cluster.wait_for_nodes()
        yield cluster, worker
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="module")
def train_rows(math_rows):
    return [r for r in math_rows if r["split"] == "train"]


def config(model, backend="local", placement="colocated", workers=1, address=None, cpus=2):
    """The runs of this file: the same training, on any backend. With `ray`, a pool of 2 CPUs
    as 2 bundles of 1 (colocated with 2 workers per group: rank r of both groups in bundle r;
    disjoint with 1: one bundle per group): on nodes of 1 CPU, PACK has to use both.
    `cpus=None` with an address: the pool is the whole cluster's CPUs (2 here)."""
    cfg = make_config(model, steps=STEPS, save_every=1)
    return dataclasses.replace(cfg, resources=ResourceConfig(
        backend=backend, placement=placement, workers_per_group=workers, num_cpus=cpus,
        ray_address=address))


@pytest.fixture(scope="module")
def reference(tiny_model_dir, train_rows, tmp_path_factory):
    """reference(workers) -> the run folder of the same training without a cluster, made
    once: 1 worker per group on the local backend; 2 (which the local backend cannot run,
    and which draws other samples: each rank generates its share with its own seed) on a
    private single-node Ray."""
    done = {}

    def get(workers: int):
        if workers not in done:
            out = tmp_path_factory.mktemp(f"reference{workers}")
            cfg = config(tiny_model_dir, "local") if workers == 1 else \
                config(tiny_model_dir, "ray", "colocated", workers)
            run_trained(cfg, train_rows, out)
            done[workers] = out
        return done[workers]

    return get


def assert_same_run(a, b):
    """Same metrics (minus timings and memory) and bit-equal final weights of both groups."""
    assert len(stripped(a / "metrics.jsonl")) == STEPS
    assert stripped(a / "metrics.jsonl") == stripped(b / "metrics.jsonl")
    for g in GROUPS:
        assert equal_weights(final_weights(a, g), final_weights(b, g))


def assert_cluster_left_whole(cluster, nodes):
    """The run left the cluster it joined running, every node, with all its CPUs free again
    (actors ended, placement group removed), and closed its own driver connection."""
    import ray

    assert not ray.is_initialized()
    assert cluster.remaining_processes_alive()
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    try:
        assert {n["NodeID"] for n in ray.nodes() if n["Alive"]} == nodes
        deadline = time.monotonic() + 30
        while ray.available_resources().get("CPU") != len(nodes) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ray.available_resources().get("CPU") == len(nodes)
    finally:
        ray.shutdown()


@pytest.mark.parametrize("placement,workers", [("disjoint", 1), ("colocated", 2)])
def test_groups_span_both_nodes(two_nodes, placement, workers, tiny_model_dir, train_rows,
                                tmp_path, reference):
    """The pool's bundles land on both nodes, so do the groups' actors (each reports the node
    it runs on), and the run equals the same run without a cluster: disjoint, one group per
    node; colocated, each group's two ranks on the two nodes, rank r of both groups on the
    same one. The pool's size is left unset: joining a cluster, it is the cluster's 2 CPUs
    (not the job's one thread, which would pack every bundle onto one node)."""
    cluster, worker = two_nodes
    both = {cluster.head_node.node_id, worker.node_id}
    cfg = config(tiny_model_dir, "ray", placement, workers, address=cluster.address, cpus=None)
    t, summary = run_trained(cfg, train_rows, tmp_path / "cluster")
    nodes = {g: grp.nodes for g, grp in t.groups.items()}
    assert summary["backend"] == "ray" and summary["resumed_from"] is None
    assert {n for ranks in nodes.values() for n in ranks} == both
    if placement == "disjoint":
        assert len(nodes["solver"]) == 1 and nodes["solver"] != nodes["verifier"]
    else:
        assert all(len(ranks) == 2 and set(ranks) == both for ranks in nodes.values())
        assert nodes["solver"] == nodes["verifier"]
    assert_cluster_left_whole(cluster, both)
    assert_same_run(tmp_path / "cluster", reference(workers))


@pytest.mark.parametrize("placement,workers", [("disjoint", 1), ("colocated", 2)])
def test_lost_node_ends_the_run_in_one_line_and_a_rerun_resumes(
        two_nodes, placement, workers, tiny_model_dir, train_rows, tmp_path, reference):
    """The worker node is killed (SIGKILL, every process of it, as a crashed machine) in
    step 2, after checkpoint 1, between generation and update: the run ends with one
    DrmasError line naming a group, rank and node it lost and the checkpoint a rerun resumes
    from; the head stays up and Ray is left. (Colocated, the rank that survives fails too, in
    its collective with the lost one; the line still names the lost rank.) The rerun resumes
    from step 1 and ends exactly like a run never interrupted: disjoint, on the local backend
    (the backend is not part of the run identity); colocated, on the cluster made whole again
    by a new worker node (2 workers per group: the local backend cannot run it)."""
    cluster, worker = two_nodes
    out = tmp_path / "run"
    marker = checkpoint.step_dir(out / "checkpoints", 1) / checkpoint.STATE
    killed = []

    def reward(answer, golds):
        if marker.exists() and not killed:
            cluster.remove_node(worker, allow_graceful=False)
            killed.append(time.monotonic())
        return odd_length_reward(answer, golds)

    cfg = config(tiny_model_dir, "ray", placement, workers, address=cluster.address)
    t = make_trainer(cfg, train_rows, out, "nonshared", "drmas", reward=reward)
    lost = [(g, r) for g, grp in t.groups.items() for r, n in enumerate(grp.nodes)
            if n == worker.node_id]
    with pytest.raises(DrmasError) as info:
        t.run()
    waited = time.monotonic() - killed[0]
    assert str(info.value) in {
        f"Ray worker group {g!r} lost rank {r} on node {worker.node_id} (its node died); "
        f"a rerun resumes from the last checkpoint, step 1" for g, r in lost}
    assert waited < 30, f"the loss took {waited:.0f} s to surface"
    assert len(stripped(out / "metrics.jsonl")) == 1 and not (out / "final").exists()
    assert_cluster_left_whole(cluster, {cluster.head_node.node_id})

    if workers == 1:
        _, summary = run_trained(config(tiny_model_dir, "local"), train_rows, out)
    else:
        new = cluster.add_node(num_cpus=1, resources={"worker": 1})
        cluster.wait_for_nodes()
        t, summary = run_trained(cfg, train_rows, out)
        assert {n for grp in t.groups.values() for n in grp.nodes} == {
            cluster.head_node.node_id, new.node_id}
    assert summary["resumed_from"] == 1
    assert_same_run(out, reference(workers))


def test_a_pool_no_node_can_hold_is_one_clear_line(two_nodes, tiny_model_dir, train_rows,
                                                   tmp_path, monkeypatch):
    """A pool of 2 CPUs as one colocated bundle cannot fit on nodes of 1 CPU: the run ends
    with a ConfigError that names the bundles and the nodes (after the reservation's timeout,
    5 s here), not with Ray's GetTimeoutError, and leaves the cluster whole and free."""
    from drmas.errors import ConfigError
    from drmas.train import pool

    cluster, worker = two_nodes
    monkeypatch.setattr(pool, "RESERVE_TIMEOUT_S", 5.0)
    cfg = config(tiny_model_dir, "ray", "colocated", 1, address=cluster.address)
    with pytest.raises(ConfigError) as info:
        make_trainer(cfg, train_rows, tmp_path / "run", "nonshared", "drmas")
    assert str(info.value) == (
        "resources: Ray could not reserve the pool in 5 s: 1 bundle(s) of 2 CPU / 0 GPU "
        "(colocated, 1 worker(s) per group), each on one node, on nodes of 1 CPU / 0 GPU, "
        "1 CPU / 0 GPU (some may be busy); lower resources.num_cpus / num_gpus or raise "
        "resources.workers_per_group so that a bundle fits on a node")
    assert_cluster_left_whole(cluster, {cluster.head_node.node_id, worker.node_id})
