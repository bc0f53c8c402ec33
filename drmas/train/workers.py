"""A worker group: one model with its optimiser and its rollout engine.

Agents that share a model share a group; each group trains only on its own agents' rows.
The trainer talks to a group through plain-data calls (`generate`, `update`, `sync`, `save`,
`load`, `stats`), so the same code runs in the driver process (`LocalGroup`, one worker) or
as W Ray actors (`pool.RayGroup`), one `GroupWorker` per rank.

The group owns the weights; its rollout engine (`rollout.engines.make_engine`: transformers
or vLLM) is reached only through the engine protocol (`rollout/base.py`). With W = 1 and a
transformers engine in the training dtype, the engine generates with the training weights
themselves. With W > 1 the training model is sharded with FSDP2 and every rank keeps a
full-weight replica, refreshed from the shards after each update (`sync`); each rank generates
its share of the prompts and backpropagates its share of every micro-batch. An engine with
weights of its own (bf16 rollout, vLLM) gets the new weights pushed by `sync`.

Precision (`precision.resolve_dtype`): float32 master weights always; with bf16 the engine
holds bf16 weights and training runs under bf16 autocast.
"""

from __future__ import annotations

import copy
import math
import random
import resource
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from drmas.algos.loss import LossOptions, policy_loss, verl_row_denominators
from drmas.config.profile import TrainConfig
from drmas.mas.base import Messages
from drmas.models.encoding import PromptEncoding, encode_prompts
from drmas.models.precision import autocast, dtype_name, resolve_dtype
from drmas.models.tiny import load_model, load_tokenizer
from drmas.rollout.base import Generation, Sampling
from drmas.rollout.engines import make_engine
from drmas.train import dist
from drmas.train.optimizer import adamw, learning_rate
from drmas.train.prefix import row_chunks, rows_logprobs
from drmas.train.reference import ReferencePolicy

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
LORA_INIT_SEED = 0


def with_lora(model, settings: TrainConfig):
    """Wrap `model` with peft LoRA adapters when the group asks for them (lora_rank > 0).

    The adapters' random init is seeded (without touching the global RNG): every rank of a
    sharded group must build the very same model, and a rerun must too.
    """
    if settings.lora_rank <= 0:
        return model
    from peft import LoraConfig, get_peft_model

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(LORA_INIT_SEED)
        return get_peft_model(model, LoraConfig(r=settings.lora_rank,
                                                lora_alpha=settings.lora_alpha, lora_dropout=0.0,
                                                target_modules=LORA_TARGETS))


def mergeable(model):
    """The plain transformers model to save: LoRA adapters merged into a copy (the training
    model keeps its adapters, bit for bit), so the weights load without peft, e.g. in vLLM."""
    if hasattr(model, "merge_and_unload"):
        return copy.deepcopy(model).merge_and_unload()
    return model


def plain_weights(model):
    """(name, tensor) of `model`'s full weights under plain transformers names (LoRA merged
    into a copy): what an engine with weights of its own loads."""
    return mergeable(model).state_dict().items()


def minibatches(n_rows: int, n_mini: int, seed: int, order: str = "shuffled",
                world: int = 1) -> list[list[int]]:
    """The rows of one update split into at most `n_mini` mini-batches: "shuffled" deals a
    seeded shuffle of the rows round-robin; "contiguous" is verl's layout with `actor.shuffle:
    False` (the paper's scripts): the rows in data order are dealt to the `world` workers in
    contiguous shares, each share is cut into chunks of ceil(rows / (n_mini x world)) rows
    (`use_adaptive_ppo_mini_batch_size`), and mini-batch k is the k-th chunk of every share.
    With that chunk size a share can run out of rows before `n_mini` chunks (10 rows in 4
    mini-batches: 3, 3, 3, 1; 12 rows in 5: 3, 3, 3, 3): upstream then takes fewer optimiser
    steps, and so does this. Upstream pads the rows to a multiple of the workers
    (`train.pad_group_rows_to`); without it the first shares here are a row longer."""
    n_mini = min(n_mini, n_rows)
    if order == "contiguous":
        world = max(1, min(world, n_rows))
        size, extra = divmod(n_rows, world)
        starts = [w * size + min(w, extra) for w in range(world + 1)]
        shares = [range(starts[w], starts[w + 1]) for w in range(world)]   # the first the longest
        chunk = -(-n_rows // (n_mini * world))
        return [[i for share in shares for i in share[k:k + chunk]]
                for k in range(0, len(shares[0]), chunk)]
    rows = list(range(n_rows))
    random.Random(seed).shuffle(rows)
    return [rows[i::n_mini] for i in range(n_mini)]


def rank_chunks(idx: list[int], rank: int, world: int, size: int,
                lengths: Sequence[int] | None = None, max_tokens: int | None = None,
                prompts: Sequence[Sequence[int]] | None = None) -> list[list[int]]:
    """This rank's micro-batches of the rows `idx`: at most `size` rows and (given the rows'
    `lengths`) `max_tokens` padded tokens each, rows of similar length together
    (`length_chunks`), or, given the rows' `prompts` too, rows that share a prefix together
    with the prefix counted once (`prefix_chunks`; both through `row_chunks`); chunks are
    dealt round-robin over ranks. Every rank gets the same number of chunks (some empty),
    because each forward/backward of a sharded model is a collective all ranks must join. The
    plan depends on nothing rank-local, so all ranks agree.
    """
    if lengths is None:
        chunks = [idx[j:j + size] for j in range(0, len(idx), size)]
    else:
        idx_prompts = [prompts[i] for i in idx] if prompts is not None else None
        chunks = [[idx[k] for k in c]
                  for c in row_chunks([lengths[i] for i in idx], size, max_tokens or 1 << 62,
                                      idx_prompts)]
    n = math.ceil(len(chunks) / world)
    mine = chunks[rank::world]
    return mine + [[] for _ in range(n - len(mine))]


class GroupWorker:
    """One rank of a worker group (rank 0 of 1 for `LocalGroup`)."""

    def __init__(self, name: str, model_path: str | Path, agents: Sequence[str],
                 settings: TrainConfig, eval_batch: int = 256, trainable: bool = True,
                 rank: int = 0, world: int = 1, device: str = "cpu", offload_engine: bool = False,
                 encoding: PromptEncoding | None = None, engine: str = "hf",
                 dtype: str = "float32", seed: int = 0):
        """`engine`: hf | vllm; `dtype`: auto | float32 | bfloat16 (see drmas/models/precision.py);
        `offload_engine`: let the engine sleep (free its GPU memory) while the group trains."""
        self.name, self.agents, self.settings = name, list(agents), settings
        self.encoding = encoding or PromptEncoding()    # chat-template kwargs, prompt cap
        self.rank, self.world, self.device = rank, world, torch.device(device)
        self.offload_engine = offload_engine and self.device.type == "cuda"
        self.dtype, self.dtype_reason = resolve_dtype(dtype, self.device)
        self.tokenizer = load_tokenizer(model_path)
        model = load_model(model_path)    # evaluation loads merged weights: no adapters
        self.reference = ReferencePolicy.build(model, self.tokenizer.pad_token_id, settings,
                                               self.device, trainable)   # KL in reward only
        self.model = (with_lora(model, settings) if trainable else model).to(self.device)
        self.model.eval()
        self.replica = None                 # W > 1: full weights beside the shards
        if world > 1:
            self.replica = copy.deepcopy(self.model).requires_grad_(False)
            dist.shard(self.model)
        self.engine = make_engine(engine, self.full_model, self.tokenizer, model_path=model_path,
                                  dtype=self.dtype, batch_size=eval_batch,
                                  seed=seed + rank, sleep_mode=self.offload_engine)
        print(f"group {name} rank {rank}: {engine} engine, {dtype_name(self.dtype)} "
              f"({self.dtype_reason}) on {self.device}", file=sys.stderr)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        # one forward per shared prefix (drmas/train/prefix.py): two model calls before one
        # backward, which a sharded (FSDP2) model is not run with here
        self.shared_prefix = settings.shared_prefix and world == 1
        self.optimizer = (adamw(self.params, lr=settings.lr, weight_decay=settings.weight_decay)
                          if trainable else None)

    # -- rollout -------------------------------------------------------------------------
    def generate(self, prompts: Sequence[Messages], sampling: Sampling, seed: int) -> list[Generation]:
        """Tokenise with this group's own tokenizer and chat template, then sample."""
        if not prompts:
            return []
        ids = encode_prompts(self.tokenizer, list(prompts), self.encoding)
        return self.engine.generate(ids, sampling, seed=seed)

    # -- reference model (KL in reward: drmas/train/reference.py) ------------------------
    def ref_logprobs(self, rows: list[dict]) -> list[list[float]]:
        return self.reference.logprobs(rows)

    def reference_digest(self) -> str | None:
        return self.reference.digest() if self.reference is not None else None

    # -- training ------------------------------------------------------------------------
    def update(self, rows: list[dict], seed: int) -> dict:
        """PPO-clip update on the group's rows (`prompt_ids`, `response_ids`, `advantage`,
        `agent`): `settings.ppo_mini_batches` optimiser steps, micro-batched. Every rank gets
        all rows, draws the same mini-batches, and backpropagates its share of each.
        Micro-batches are per agent and sorted by length (memory, exact per-agent norms);
        under `loss_aggregation: verl` each row is nonetheless weighed as in upstream's
        layout, where micro-batches of `micro_batch_rows` rows per device mix the agents in
        data order (`verl_row_denominators`), so the gradient is upstream's.

        Returns per-group metrics and, per agent, the norm of that agent's share of the
        gradient (before clipping), averaged over mini-batches: with a shared model the group
        norm alone would hide which agent spiked; and per agent its clip fraction and approx
        KL (token means over its rows, as the group's). Identical on every rank.
        """
        s = self.settings
        if not rows:
            return {"rows": 0}
        self.sleep()
        minis = minibatches(len(rows), s.ppo_mini_batches, seed, s.minibatch_order, self.world)
        lengths = [len(r["prompt_ids"]) + len(r["response_ids"]) for r in rows]
        prompts = self._prompts(rows)
        plan = [[(agent, rank_chunks([i for i in mini if rows[i]["agent"] == agent], self.rank,
                                     self.world, s.micro_batch_rows, lengths, s.micro_batch_tokens,
                                     prompts))
                 for agent in self.agents] for mini in minis]
        old = self._old_logprobs(rows, plan)
        totals = {"loss": 0.0, "clip_frac": 0.0, "approx_kl": 0.0, "entropy": 0.0, "tokens": 0}
        norms, agent_norms, skipped = [], {a: [] for a in self.agents}, 0
        per_agent = {a: {"clip_frac": 0.0, "approx_kl": 0.0, "tokens": 0} for a in self.agents}
        self.model.train()
        opts = LossOptions.of(s)
        for mini, agents in zip(minis, plan):
            row_denoms = None
            if opts.loss_aggregation == "verl":      # each row weighed as in upstream's layout
                in_order = sorted(mini)              # data order, agents mixed
                row_denoms = dict(zip(in_order, verl_row_denominators(
                    [len(rows[i]["response_ids"]) for i in in_order], s.micro_batch_rows,
                    self.world)))
            denom = opts.scale(float(sum(len(rows[i]["response_ids"]) for i in mini)),
                               row_denominators=row_denoms)
            self.optimizer.zero_grad(set_to_none=True)
            before = self._grads()
            for agent, chunks in agents:       # agent by agent: exact per-agent norms
                for chunk in chunks:
                    self._backward([rows[i] for i in chunk], [old[i] for i in chunk], denom, totals,
                                   per_agent[agent], chunk)
                if chunks:
                    after = self._grads()
                    diff = dist.all_sum([sum(float((a - b).double().pow(2).sum())
                                             for a, b in zip(after, before))])[0]
                    agent_norms[agent].append(math.sqrt(diff))
                    before = after
            norm, finite = dist.global_grad_norm_and_clip(self.params, s.grad_clip)
            norms.append(norm)
            if finite:
                self.optimizer.step()
            else:
                skipped += 1
        self.optimizer.zero_grad(set_to_none=True)
        self.model.eval()
        keys = list(totals)
        totals = dict(zip(keys, dist.all_sum([totals[k] for k in keys])))
        tokens = max(totals.pop("tokens"), 1)
        out = {k: v / tokens for k, v in totals.items()}
        out.update(rows=len(rows), grad_norm=sum(norms) / len(norms), grad_norm_max=max(norms),
                   skipped_steps=skipped, learning_rate=learning_rate(self.optimizer),
                   agent_grad_norm={a: sum(v) / len(v) for a, v in agent_norms.items() if v})
        summed = dist.all_sum([v for a in self.agents for v in per_agent[a].values()])
        for a, (clip, kl, n) in zip(self.agents, zip(*[iter(summed)] * 3)):
            if n:
                out.setdefault("agent_clip_frac", {})[a] = clip / n
                out.setdefault("agent_approx_kl", {})[a] = kl / n
        return out

    def paired_grad_sq(self, rows: list[dict], advantage_sets: dict[str, list[float]]) -> dict:
        """The paired same-batch measurement (drmas/algos/paired.py): per agent of this group,
        the squared norm of the gradient of that agent's policy-gradient term at ratio 1 (no
        clip, entropy or KL) on its own rows (`prompt_ids`, `response_ids`, `agent`, and
        `loss_weight` when present), once per advantage set ({name: one value per row}).

        Returns {agent: {name: grad_sq, ..., "rows": n}} for the agents with rows. The token
        denominator is the group's total response tokens over `rows` (all its agents'): one
        fixed scale, so the ratio of two sets does not depend on it. The rows are packed and
        micro-batched as `update` does (micro_batch_rows/tokens, autocast, temperature), with
        the model in train mode; weights, optimiser state, gradients (None after) and RNG
        states are left as they were. With W > 1 every rank gets all rows, backpropagates its
        share of the micro-batches (FSDP2 reduces the gradients) and the squared local shards
        are summed over ranks, as `update` does for per-agent norms: identical on every rank.
        """
        from drmas.algos.paired import surrogate_grad_sq

        s = self.settings
        if not rows:
            return {}
        self.sleep()
        lengths = [len(r["prompt_ids"]) + len(r["response_ids"]) for r in rows]
        prompts = self._prompts(rows)
        denom = float(max(sum(len(r["response_ids"]) for r in rows), 1))
        adv = {k: torch.tensor(v, dtype=torch.float64) for k, v in advantage_sets.items()}
        weights = (torch.tensor([r["loss_weight"] for r in rows], dtype=torch.float64)
                   if "loss_weight" in rows[0] else None)

        def micro(chunk):
            def get():
                if not chunk:
                    if self.world > 1:
                        self._dummy_forward(backward=True)
                    return None
                with autocast(self.device, self.dtype):
                    lp, _, resp = self._logprobs([rows[i] for i in chunk])
                return lp, resp, torch.tensor(chunk)
            return get

        out = {}
        devices = [self.device] if self.device.type == "cuda" else []
        self.model.train()
        try:
            with torch.random.fork_rng(devices=devices):
                for agent in self.agents:
                    idx = [i for i, r in enumerate(rows) if r["agent"] == agent]
                    if not idx:
                        continue
                    chunks = rank_chunks(idx, self.rank, self.world, s.micro_batch_rows, lengths,
                                         s.micro_batch_tokens, prompts)
                    sq = surrogate_grad_sq(
                        self.params, [micro(c) for c in chunks], adv, denom, weights,
                        backward=lambda loss: (loss * self.world).backward(),  # FSDP averages
                        sq_norm=dist.sq_norm, reduce=dist.all_sum)
                    out[agent] = {**sq, "rows": len(idx)}
        finally:
            self.model.eval()
            for p in self.params:
                p.grad = None
        return out

    def _grads(self) -> list[torch.Tensor]:
        """A copy of this rank's gradient shards (zeros where no gradient yet)."""
        return [dist.local(p.grad).detach().clone() if p.grad is not None
                else torch.zeros_like(dist.local(p)) for p in self.params]

    @torch.no_grad()
    def _old_logprobs(self, rows: list[dict], plan) -> dict[int, torch.Tensor]:
        """Logprobs of the behaviour policy for this rank's rows. The engine's own when it
        computes them like the trainer (it generates with these very tensors); else recomputed
        with the trainer before any step: when `recompute_logprobs` asks for it, and always
        for an engine with weights of its own (vLLM, a bf16 copy), whose numerics differ."""
        chunks = [chunk for agents in plan for _, cs in agents for chunk in cs]
        if not (self.settings.recompute_logprobs or self.engine.needs_weights):
            return {i: torch.tensor(rows[i]["logprobs"], dtype=torch.float32)
                    for chunk in chunks for i in chunk}
        out = {}
        for chunk in chunks:
            if not chunk:
                self._dummy_forward()
                continue
            with autocast(self.device, self.dtype):
                lp, _, resp = self._logprobs([rows[i] for i in chunk])
            out.update({i: lp[b][resp[b] > 0].cpu() for b, i in enumerate(chunk)})
        return out

    def _prompts(self, rows: list[dict]) -> list[list[int]] | None:
        """The rows' prompts when micro-batches keep shared prefixes together, else None."""
        return [r["prompt_ids"] for r in rows] if self.shared_prefix else None

    def _logprobs(self, rows: list[dict], with_entropy: bool = False, entropy_grad: bool = False):
        """(logprobs, entropy or None, response mask) of one micro-batch in `pack`'s layout, by
        the shared-prefix forward (`train.shared_prefix`) or the unshared one."""
        return rows_logprobs(self.model, [r["prompt_ids"] for r in rows],
                             [r["response_ids"] for r in rows], self.tokenizer.pad_token_id,
                             self.settings.temperature, with_entropy, entropy_grad,
                             shared=self.shared_prefix, device=self.device)

    def _dummy_forward(self, backward: bool = False) -> None:
        """Join the collectives of a micro-batch this rank has no rows for (zero gradient)."""
        ids = torch.full((1, 2), self.tokenizer.pad_token_id, dtype=torch.long, device=self.device)
        with autocast(self.device, self.dtype):
            logits = self.model(input_ids=ids, use_cache=False).logits
        if backward:
            (logits.float().sum() * 0.0).backward()

    def _backward(self, rows: list[dict], old: list[torch.Tensor], denom, totals: dict,
                  agent_totals: dict | None = None, idx: Sequence[int] | None = None):
        """Backpropagate one micro-batch; `denom(micro_tokens, idx)` divides its summed token
        losses (`LossScale`: the mini-batch's aggregate, see drmas/algos/loss.py; under verl
        one denominator per row, from the rows' indices `idx` in the mini-batch's rows);
        `agent_totals` collects this agent's clip fraction and KL (token-weighted). The logged
        loss is the micro-batch's share of the mini-batch loss times its token count."""
        if not rows:
            if self.world > 1:
                self._dummy_forward(backward=True)
            return
        opts = LossOptions.of(self.settings)
        with autocast(self.device, self.dtype):
            lp, entropy, resp = self._logprobs(rows, with_entropy=True,
                                               entropy_grad=bool(opts.entropy_coeff))
        old_full = torch.zeros_like(lp)
        for b, o in enumerate(old):
            old_full[b][resp[b] > 0] = o.to(self.device)
        adv = torch.tensor([r["advantage"] for r in rows], dtype=torch.float32, device=self.device)
        weights = (torch.tensor([r["loss_weight"] for r in rows], device=self.device)
                   if "loss_weight" in rows[0] else None)      # loss balance (algos/balance.py)
        scale = denom(float(resp.sum()), idx)
        if isinstance(scale, torch.Tensor):
            scale = scale.to(self.device)
        loss, m = policy_loss(lp, old_full, adv, resp, clip_low=self.settings.clip_low,
                              clip_high=self.settings.clip_high, dual_clip=self.settings.dual_clip,
                              entropy=entropy, denom=scale,
                              entropy_coeff=opts.entropy_coeff, log_ratio_clamp=opts.log_ratio_clamp,
                              row_weights=weights)
        # FSDP averages gradients over ranks; the loss is a sum over all ranks' tokens / denom
        (loss * self.world).backward()
        n = m["n_tokens"]
        totals["loss"] += float(loss.detach()) * (denom.minibatch_tokens
                                                  if isinstance(scale, torch.Tensor) else scale)
        for key in ("clip_frac", "approx_kl", "entropy"):
            totals[key] += m[key] * n
        totals["tokens"] += n
        if agent_totals is not None:
            for key in ("clip_frac", "approx_kl"):
                agent_totals[key] += m[key] * n
            agent_totals["tokens"] += n

    # -- engine weights and memory ----------------------------------------------------------
    @property
    def full_model(self):
        """The trained weights, unsharded (the replica when W > 1): what is saved and what
        an engine with weights of its own is refreshed from."""
        return self.replica if self.replica is not None else self.model

    def sync(self) -> float:
        """Bring the new weights to the engine (through the replica when sharded); seconds
        spent (about 0 when the engine generates with the training weights themselves)."""
        t0 = time.perf_counter()
        self.wake()
        if self.world > 1:
            lora = self.settings.lora_rank > 0
            state = dist.full_state(self.model, trainable_only=lora)
            dist.load_full_state(self.replica, state, sharded=False)
        if self.engine.needs_weights:
            self.engine.update_weights(plain_weights(self.full_model))
        return time.perf_counter() - t0

    def sleep(self) -> None:
        """Free the engine's (and the replica's) device memory while the group trains."""
        if self.offload_engine:
            self.engine.sleep()
            if self.replica is not None:
                self.replica.to("cpu")
                torch.cuda.empty_cache()

    def wake(self) -> None:
        if self.offload_engine:
            if self.replica is not None:
                self.replica.to(self.device)
            self.engine.wake()

    def describe(self) -> dict:
        """What this group actually trains with (for summary.json and tests)."""
        opt = self.optimizer.param_groups[0] if self.optimizer is not None else {}
        return {"agents": self.agents, "world": self.world, "device": str(self.device),
                "engine": self.engine.kind, "dtype": dtype_name(self.dtype),
                "dtype_reason": self.dtype_reason,
                "lr": opt.get("lr"), "weight_decay": opt.get("weight_decay"),
                "lora_rank": self.settings.lora_rank,
                "trainable_params": sum(p.numel() for p in self.params),    # DTensor: global
                "params": sum(p.numel() for p in self.model.parameters())}

    def stats(self) -> dict:
        """Peak memory of this worker process: device memory on GPU, resident set on CPU."""
        if self.device.type == "cuda":
            return {"peak_mem_mb": torch.cuda.max_memory_allocated(self.device) / 2**20}
        return {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}

    # -- persistence ---------------------------------------------------------------------
    def save(self, path: str | Path, with_optimizer: bool = True) -> None:
        """Rank 0 writes the full weights as safetensors (`from_pretrained`- and vLLM-loadable,
        LoRA merged) + tokenizer; with the optimiser: the adapters (LoRA), the full optimiser
        state and every rank's RNG states, so that `load` resumes exactly. All ranks call it."""
        path = Path(path)
        lora = self.settings.lora_rank > 0
        trainable = dist.full_state(self.model, trainable_only=True) if lora else None
        optim = (dist.optimizer_state(self.model, self.optimizer)
                 if with_optimizer and self.optimizer is not None else None)
        path.mkdir(parents=True, exist_ok=True)
        if self.rank == 0:
            mergeable(self.full_model).save_pretrained(path, safe_serialization=True)
            self.tokenizer.save_pretrained(path)
            if optim is not None:
                torch.save({"optimizer": optim, "settings": asdict(self.settings)},
                           path / "optimizer.pt")
                if lora:
                    from safetensors.torch import save_file
                    save_file({k: v.contiguous() for k, v in trainable.items()},
                              str(path / "lora.safetensors"))
        if optim is not None:
            torch.save(self._rng_state(), path / f"rng_rank{self.rank}.pt")

    def _rng_state(self) -> dict:
        """This rank's RNG states: CPU torch, Python, NumPy, and its CUDA device's when it
        trains on one (sampling and dropout there draw from the device generator)."""
        state = {"torch": torch.get_rng_state(), "python": random.getstate(),
                 "numpy": np.random.get_state()}
        if self.device.type == "cuda":
            state["cuda"] = torch.cuda.get_rng_state(self.device)
        return state

    def _set_rng_state(self, state: dict) -> None:
        """Restore `_rng_state`; a CUDA state is skipped on a rank without a CUDA device
        (a GPU checkpoint resumed on CPU: the CPU states still restore)."""
        torch.set_rng_state(state["torch"])
        random.setstate(state["python"])
        np.random.set_state(state["numpy"])
        if "cuda" in state and self.device.type == "cuda":
            torch.cuda.set_rng_state(state["cuda"], self.device)

    def load(self, path: str | Path) -> None:
        """Restore what `save` wrote (resume); any world size can load any world size's save.

        Every file is read before anything is changed, so a torn file raises with this worker
        as it was and the trainer can fall back to an older checkpoint."""
        from safetensors.torch import load_file

        path = Path(path)
        lora = self.settings.lora_rank > 0
        state = load_file(str(path / ("lora.safetensors" if lora else "model.safetensors")))
        saved = (torch.load(path / "optimizer.pt", weights_only=False)
                 if self.optimizer is not None and (path / "optimizer.pt").exists() else None)
        rng = path / f"rng_rank{self.rank}.pt"
        rng_state = torch.load(rng, weights_only=False) if rng.exists() else None
        dist.load_full_state(self.model, state, sharded=self.world > 1)
        self.sync()                 # an engine with weights of its own gets the loaded ones
        if saved is not None:
            dist.load_optimizer_state(self.model, self.optimizer, saved["optimizer"])
        if rng_state is not None:
            self._set_rng_state(rng_state)


class LocalGroup(GroupWorker):
    """A whole worker group in this process: one worker, no torch.distributed (W = 1)."""

    def pop_overhead(self) -> float:
        """Time spent moving calls rather than computing: none in-process."""
        return 0.0

    def close(self) -> None:
        pass
