"""The shared resource pool: which worker groups run where, as Ray actors.

One Ray placement group reserves the pool (`num_cpus` CPUs, `num_gpus` GPUs). Rank r of a
group is placed in a bundle of it:
- `colocated` (the paper's setup): W bundles, each holding rank r of *every* group with a
  fraction of the bundle; groups take turns on the same devices (one group generates or trains
  at a time), and on GPU an engine sleeps (frees its memory) while its group trains.
- `disjoint`: G x W bundles, one slice of the pool per group; groups update side by side.
On CPU the same code runs with CPU-only bundles. `RayGroup` presents the W actors of one group
with the same plain-data calls as `LocalGroup`, so the trainer does not care which it has.
The bundles may lie on several nodes of a cluster (`resources.ray_address`); a rank whose
actor dies with its node ends the run with a `WorkerLostError` (tests/train/test_ray_cluster.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

from drmas.config.profile import ResourceConfig, TrainConfig
from drmas.errors import ConfigError, DrmasError
from drmas.rollout.base import Generation, Sampling
from drmas.rollout.mas import derived_seed
from drmas.rollout.sampler import local_device, visible_gpus as _visible_gpus


class WorkerLostError(DrmasError):
    """A rank of a Ray worker group is gone: its actor died (its node was lost, its process
    killed). The cluster failed, not the configuration or the harness, and a rerun can resume
    from the last checkpoint, so it is the user's one-line error (exit status 2), not a bug's
    traceback; the trainer adds which checkpoint (`Trainer.run`)."""


RESERVE_TIMEOUT_S = 120.0   # how long a run waits for its pool's bundles before saying why


@dataclass(frozen=True)
class Slot:
    """Where one rank of one group runs: a bundle of the pool and its share of it."""

    bundle: int
    num_cpus: float
    num_gpus: float
    threads: int


def plan_slots(groups: Sequence[str], world: int, cpus: int, gpus: int, placement: str):
    """(bundles, {group: [Slot per rank]}) for `placement` (pure: tested without Ray)."""
    n = len(groups)
    if placement == "colocated":
        bundle = {"CPU": cpus / world, **({"GPU": gpus / world} if gpus else {})}
        slots = {g: [Slot(r, bundle["CPU"] / n, bundle.get("GPU", 0) / n,
                          max(1, int(bundle["CPU"]))) for r in range(world)] for g in groups}
        return [dict(bundle) for _ in range(world)], slots
    if placement == "disjoint":
        k = n * world
        bundle = {"CPU": cpus / k, **({"GPU": gpus / k} if gpus else {})}
        slots = {g: [Slot(i * world + r, bundle["CPU"], bundle.get("GPU", 0),
                          max(1, int(bundle["CPU"]))) for r in range(world)]
                 for i, g in enumerate(groups)}
        return [dict(bundle) for _ in range(k)], slots
    raise ValueError(f"unknown placement {placement!r}")


class ResourcePool:
    """A local Ray instance and one placement group over it, for the life of one run."""

    def __init__(self, res: ResourceConfig, threads: int):
        import ray

        self.res = res
        self.cpus = res.num_cpus or threads
        self.gpus = res.num_gpus if res.num_gpus is not None else _visible_gpus()
        t0 = time.perf_counter()
        self.owns_ray = not ray.is_initialized()     # a Ray someone else started stays up
        if self.owns_ray:
            start_ray(self.cpus, self.gpus, res.ray_address)
        if res.ray_address:     # a cluster: unset sizes mean all of it, not this machine's
            total = ray.cluster_resources()
            self.cpus = res.num_cpus or int(total.get("CPU", 0))
            self.gpus = res.num_gpus if res.num_gpus is not None else int(total.get("GPU", 0))
        self.start_s = time.perf_counter() - t0
        self.pg, self.slots = None, {}

    def reserve(self, groups: Sequence[str]) -> dict[str, list[Slot]]:
        """Reserve the bundles for `groups` and return each group's slots."""
        import ray
        from ray.exceptions import GetTimeoutError
        from ray.util.placement_group import placement_group

        bundles, self.slots = plan_slots(groups, self.res.workers_per_group, self.cpus,
                                         self.gpus, self.res.placement)
        self.pg = placement_group(bundles, strategy="PACK")
        try:
            ray.get(self.pg.ready(), timeout=RESERVE_TIMEOUT_S)
        except GetTimeoutError:
            raise ConfigError(_unplaceable(bundles, self.res)) from None
        return self.slots

    @property
    def colocated(self) -> bool:
        return self.res.placement == "colocated"

    def shutdown(self) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        if self.pg is not None:
            remove_placement_group(self.pg)
            self.pg = None
        if self.owns_ray and ray.is_initialized():
            ray.shutdown()


def _unplaceable(bundles: list[dict], res: ResourceConfig) -> str:
    """Why the pool waited in vain (a bundle fits on no node, or the nodes are busy): the
    bundles asked for and the nodes there are, with what would make them fit."""
    import ray

    def size(r: dict) -> str:
        return f"{r.get('CPU', 0):g} CPU / {r.get('GPU', 0):g} GPU"

    nodes = ", ".join(size(n["Resources"]) for n in ray.nodes() if n["Alive"])
    return (f"resources: Ray could not reserve the pool in {RESERVE_TIMEOUT_S:g} s: "
            f"{len(bundles)} bundle(s) of {size(bundles[0])} ({res.placement}, "
            f"{res.workers_per_group} worker(s) per group), each on one node, on nodes of "
            f"{nodes} (some may be busy); lower resources.num_cpus / num_gpus or raise "
            f"resources.workers_per_group so that a bundle fits on a node")


def start_ray(num_cpus: int, num_gpus: int = 0, address: str | None = None) -> None:
    """A fresh local Ray instance (address="local": never attach to another cluster on the
    machine by accident), or the existing cluster at `address` (`resources.ray_address`);
    actors inherit single-threaded OpenMP and the CPU kernels' variables
    (drmas/models/kernels.py) and set their own torch threads."""
    import logging
    import os

    import ray

    from drmas.models.kernels import AVX2

    # A private local cluster gets Ray's default token authentication; its notice saying so
    # would open every training log, so only that logger's warnings are silenced.
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    # the CPU kernels' variables go along too: an actor on another node inherits nothing
    pinned = {k: os.environ[k] for k in AVX2 if k in os.environ}
    env = {"env_vars": {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", **pinned}}
    if address:                          # a cluster someone else sized: join it as it is
        ray.init(address=address, log_to_driver=False, configure_logging=False, runtime_env=env)
        return
    ray.init(address="local", num_cpus=num_cpus, num_gpus=num_gpus, include_dashboard=False,
             log_to_driver=False, configure_logging=False, runtime_env=env)


class _Actor:
    """The process behind one rank: builds its `GroupWorker` once the process group is up and
    runs any of its methods, reporting how long the work itself took (to isolate Ray's own
    overhead: the driver's wall time minus this)."""

    def __init__(self, threads: int):
        from drmas.models.startup import prepare_process

        prepare_process(threads)
        self.worker = None

    def address(self) -> tuple[str, int]:
        import ray

        from drmas.net import free_port

        return ray.util.get_node_ip_address(), free_port()

    def setup(self, addr: str, port: int, rank: int, world: int, kwargs: dict) -> str:
        """Build the worker; returns the id of the Ray node this rank runs on."""
        import ray
        import torch

        from drmas.train import dist
        from drmas.train.workers import GroupWorker

        device = "cuda" if torch.cuda.is_available() else "cpu"   # Ray sets the visible GPU
        if world > 1:
            dist.init_group(rank, world, addr, port, torch.device(device))
        self.worker = GroupWorker(rank=rank, world=world, device=device, **kwargs)
        return ray.get_runtime_context().get_node_id()

    def alive(self) -> bool:
        """Answers as soon as the actor is free: a rank that never can is gone
        (`RayGroup._lost_ranks`)."""
        return True

    def call(self, method: str, *args, **kwargs):
        t0 = time.perf_counter()
        out = getattr(self.worker, method)(*args, **kwargs)
        return out, time.perf_counter() - t0

    def close(self) -> None:
        from drmas.train import dist

        dist.destroy()


class RayGroup:
    """One worker group as W Ray actors (a torch.distributed group, FSDP2 when W > 1)."""

    def __init__(self, name: str, model_path, agents: Sequence[str], settings: TrainConfig,
                 pool: ResourcePool, slots: list[Slot], eval_batch: int = 256, encoding=None,
                 options: dict | None = None):
        """Start the actors and their setup; `ready()` waits for it (so that several groups
        load their models at the same time)."""
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.name, self.agents, self.world = name, list(agents), len(slots)
        self.overhead_s = 0.0
        self.nodes: list[str | None] = [None] * self.world   # each rank's Ray node id (ready)
        self.lost = False
        remote = ray.remote(_Actor)
        self.actors = [remote.options(
            num_cpus=s.num_cpus, num_gpus=s.num_gpus,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pool.pg, placement_group_bundle_index=s.bundle),
        ).remote(s.threads) for s in slots]
        addr, port = ray.get(self.actors[0].address.remote()) if self.world > 1 else ("", 0)
        kwargs = dict(name=name, model_path=str(model_path), agents=list(agents),
                      settings=settings, eval_batch=eval_batch, offload_engine=pool.colocated,
                      encoding=encoding, **(options or {}))
        self._setup = [a.setup.remote(addr, port, r, self.world, kwargs)
                       for r, a in enumerate(self.actors)]

    def ready(self) -> "RayGroup":
        """Wait for the actors' setup; records the Ray node each rank runs on (`nodes`)."""
        self.nodes = self._get(self._setup)
        return self

    def _get(self, refs: list) -> list:
        """ray.get(refs), except that when a rank is gone the failure becomes a
        `WorkerLostError` naming the group, the rank and its node. Ray reports the loss as
        RayActorError on the lost rank's call, but the ranks that survive in the same
        collective may fail first (gloo: connection closed by peer) with an ordinary task
        error; so after any Ray error every rank is asked whether it is still there. When all
        are, the error was not a loss (a bug in the worker, say) and is raised as it is."""
        import ray
        from ray.exceptions import RayError

        try:
            return ray.get(refs)
        except RayError as exc:
            lost = self._lost_ranks()
            if not lost:
                raise
            self.lost = True
            rank, why = lost[0]
            node = f" on node {self.nodes[rank]}" if self.nodes[rank] else ""
            raise WorkerLostError(f"Ray worker group {self.name!r} lost rank {rank}{node} "
                                  f"({why})") from exc

    def _lost_ranks(self, timeout: float = 60.0) -> list[tuple[int, str]]:
        """[(rank, why)] of the ranks that are gone, all asked at once; the first rank found
        dead ends the wait. Right after a node is lost Ray only knows that its actors cannot
        be reached (ActorUnavailableError); it declares them dead once the node has missed its
        health checks (seconds to tens of seconds), so such a rank is asked again until then
        and, still unreachable after `timeout`, counts as gone. A rank that is only busy
        (waiting in a collective with a failed peer) is not gone."""
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError

        deadline = time.monotonic() + timeout
        asked = {a.alive.remote(): r for r, a in enumerate(self.actors)}
        unreachable: set[int] = set()
        while asked and time.monotonic() < deadline:
            done, _ = ray.wait(list(asked), num_returns=1,
                               timeout=max(0.0, deadline - time.monotonic()))
            for ref in done:
                rank = asked.pop(ref)
                try:
                    ray.get(ref)
                    unreachable.discard(rank)
                except ActorUnavailableError:
                    unreachable.add(rank)
                    time.sleep(0.5)
                    asked[self.actors[rank].alive.remote()] = rank
                except RayActorError as exc:
                    return [(rank, _death_cause(exc))]
        return [(r, "it cannot be reached") for r in sorted(unreachable)]

    # -- calls: every rank runs the same method; Ray's share of the wall time is recorded ----
    def _submit(self, method: str, per_rank_args: list[tuple]):
        return time.perf_counter(), [a.call.remote(method, *args)
                                     for a, args in zip(self.actors, per_rank_args)]

    def _collect(self, handle) -> list:
        t0, refs = handle
        outs = self._get(refs)
        self.overhead_s += (time.perf_counter() - t0) - max(s for _, s in outs)
        return [o for o, _ in outs]

    def _all(self, method: str, *args) -> list:
        return self._collect(self._submit(method, [args] * self.world))

    def generate(self, prompts, sampling: Sampling, seed: int) -> list[Generation]:
        """Prompts split into W contiguous shares, one per rank, each with its own seed
        (rank 0 of a one-worker group keeps `seed`: the same samples as `LocalGroup`)."""
        prompts = list(prompts)
        if self.world == 1:
            return self._all("generate", prompts, sampling, seed)[0]
        per = -(-len(prompts) // self.world)
        args = [(prompts[r * per:(r + 1) * per], sampling, derived_seed(seed, "rank", r))
                for r in range(self.world)]
        return [g for out in self._collect(self._submit("generate", args)) for g in out]

    def update(self, rows: list[dict], seed: int) -> dict:
        return self.wait(self.update_async(rows, seed))

    def update_async(self, rows: list[dict], seed: int):
        """Start an update (every rank gets all rows, once, through the object store) and
        return a handle for `wait`: groups on disjoint slices update side by side."""
        import ray

        if not rows:
            return None
        t0 = time.perf_counter()                   # the put is Ray overhead too
        ref = ray.put(rows)
        return t0, self._submit("update", [(ref, seed)] * self.world)[1]

    def wait(self, handle) -> dict:
        return {"rows": 0} if handle is None else self._collect(handle)[0]

    def paired_grad_sq(self, rows: list[dict], advantage_sets: dict) -> dict:
        """The paired gradient measurement (`GroupWorker.paired_grad_sq`): every rank gets all
        rows, once, through the object store; the result is the same on every rank."""
        import ray

        if not rows:
            return {}
        t0 = time.perf_counter()                   # the put is Ray overhead too
        ref = ray.put(rows)
        return self._collect((t0, self._submit("paired_grad_sq",
                                               [(ref, advantage_sets)] * self.world)[1]))[0]

    def sync(self) -> float:
        return max(self._all("sync"))

    def ref_logprobs(self, rows: list[dict]) -> list[list[float]]:
        """Reference logprobs (KL in reward): every rank holds the whole reference model, so
        the rows are split into W contiguous shares, one per rank."""
        per = -(-len(rows) // self.world)
        args = [(rows[r * per:(r + 1) * per],) for r in range(self.world)]
        return [lp for out in self._collect(self._submit("ref_logprobs", args)) for lp in out]

    def reference_digest(self) -> str | None:
        return self._all("reference_digest")[0]

    def describe(self) -> dict:
        return self._all("describe")[0]

    def stats(self) -> dict:
        per_rank = self._all("stats")
        return {k: max(s[k] for s in per_rank) for k in per_rank[0]}

    def save(self, path, with_optimizer: bool = True) -> None:
        self._all("save", str(path), with_optimizer)

    def load(self, path) -> None:
        self._all("load", str(path))

    def pop_overhead(self) -> float:
        out, self.overhead_s = self.overhead_s, 0.0
        return out

    def close(self) -> None:
        """Close each rank's process group, then end the actors. After a lost rank the
        survivors may sit in a broken collective, so they are ended straight away; a rank
        that is gone is no error here (the run's own error, if any, is the one to report)."""
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        try:
            if not self.lost:
                ray.get([a.close.remote() for a in self.actors], timeout=30)
        except (RayActorError, GetTimeoutError):
            pass
        finally:
            for a in self.actors:
                ray.kill(a)


def _death_cause(exc) -> str:
    """A few words on why an actor died, from Ray's (long, multi-line) message: the GCS's
    own sentences ("The actor died because its node has died.", "The actor is dead because
    its worker process has died. ...")."""
    text = str(exc)
    if "its node has died" in text:
        return "its node died"
    if "its worker process has died" in text:
        return "its process died"
    return f"its actor died: {type(exc).__name__}"


def make_groups(plan: dict, paths: dict, res: ResourceConfig, threads: int,
                eval_batch: int = 256, options: dict | None = None):
    """Build every group of `plan` ({group: {"agents", "settings"}}) from `paths`
    ({group: model dir}) on the configured backend; returns (groups, pool or None).
    `options` ({group: {"engine", "dtype"}}, see `groups.engine_options`) go to the workers."""
    options = options or {}
    if res.backend == "local":
        from drmas.train.workers import LocalGroup

        device = local_device(res)
        return {g: LocalGroup(g, paths[g], spec["agents"], spec["settings"], eval_batch,
                              encoding=spec.get("encoding"), device=device,
                              offload_engine=device == "cuda", **options.get(g, {}))
                for g, spec in plan.items()}, None
    pool = ResourcePool(res, threads)
    try:
        slots = pool.reserve(list(plan))
        groups = {g: RayGroup(g, paths[g], spec["agents"], spec["settings"], pool, slots[g],
                              eval_batch, encoding=spec.get("encoding"), options=options.get(g))
                  for g, spec in plan.items()}
        for grp in groups.values():
            grp.ready()
    except BaseException:
        pool.shutdown()
        raise
    return groups, pool
