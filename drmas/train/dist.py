"""torch.distributed inside one worker group: process-group setup, FSDP2 sharding, and the
collectives the PPO update needs (global sums, global grad norm, full-weight gathers).

Every helper also works with world = 1 and no process group, so the single-worker path
(`LocalGroup`, tests, evaluation) runs the very same update code without torch.distributed.
"""

from __future__ import annotations

import math
from datetime import timedelta

import torch
import torch.distributed as dist

from drmas.algos.loss import grad_norm_and_clip

# torch.distributed.checkpoint (with the torch.distributed.tensor it brings, 1-2 s to import
# on a small CPU) is imported by the helpers below that use it, not here: a job that never
# gathers or saves state through it (an evaluation; a single-worker run until it saves its
# first checkpoint with the optimiser) does not pay for it (tests/test_import_cost.py).


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def init_group(rank: int, world: int, addr: str, port: int, device: torch.device,
               timeout_s: float = 600.0) -> None:
    """Join the group's process group (one per worker group: every actor is in exactly one)."""
    dist.init_process_group(backend_for(device), init_method=f"tcp://{addr}:{port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=timeout_s))


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def shard(model: torch.nn.Module) -> torch.nn.Module:
    """FSDP2: one shard unit per transformer block (the classes the model declares unsplittable)
    plus the root, which keeps the (tied) embeddings and the head."""
    from torch.distributed.fsdp import fully_shard

    names = set(getattr(model, "_no_split_modules", None) or [])
    if not names and hasattr(model, "get_base_model"):        # peft wrapper
        names = set(getattr(model.get_base_model(), "_no_split_modules", None) or [])
    for module in list(model.modules()):
        if type(module).__name__ in names:
            fully_shard(module)
    fully_shard(model)
    return model


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a (possibly DTensor) parameter or gradient."""
    return t.to_local() if hasattr(t, "to_local") else t


def all_sum(values: list[float]) -> list[float]:
    """Element-wise sum of python floats over the group (identity when world = 1)."""
    if world_size() == 1:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t)
    return t.cpu().tolist()


def sq_norm(tensors) -> float:
    """Sum of squares of this rank's shards (float64, so the global sum is order-robust)."""
    return float(sum(local(t).detach().double().pow(2).sum() for t in tensors))


def global_grad_norm_and_clip(params: list[torch.nn.Parameter], max_norm: float):
    """Norm of the whole (sharded) gradient before clipping, and whether it is finite.

    Same contract and clip coefficient as `algos.loss.grad_norm_and_clip`, which it is when
    world = 1; with shards the squared local norms are summed over the group first.
    """
    if world_size() == 1:
        return grad_norm_and_clip(params, max_norm)
    grads = [p.grad for p in params if p.grad is not None]
    norm = math.sqrt(all_sum([sq_norm(grads)])[0])
    finite = math.isfinite(norm)
    if finite:
        coef = min(1.0, max_norm / (norm + 1e-6))
        for g in grads:
            local(g).mul_(coef)
    return norm, finite


def full_state(model: torch.nn.Module, trainable_only: bool = False) -> dict:
    """Unsharded weights on every rank (a collective when sharded): what the engine and the
    saved checkpoint need. `trainable_only` skips frozen weights (LoRA: only the adapters)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(
        full_state_dict=True, ignore_frozen_params=trainable_only))


def load_full_state(model: torch.nn.Module, state: dict, sharded: bool) -> None:
    """Load full (unsharded) weights into a model (FSDP2-sharded or not). Missing keys (a tied
    head, a frozen LoRA base) keep their values; a key the model lacks is an error, because a
    silently ignored weight would make a resume quietly wrong."""
    if sharded:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        result = set_model_state_dict(model, state, options=StateDictOptions(
            full_state_dict=True, strict=False))
    else:
        result = model.load_state_dict(state, strict=False)
    if result.unexpected_keys:
        raise KeyError(f"weights the model does not have: {sorted(result.unexpected_keys)[:5]}")


def optimizer_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """The full optimiser state keyed by parameter name: the same file whatever the world
    size, so a run can resume with a different number of workers. Rank 0 gets it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(model, optimizer, options=StateDictOptions(
        full_state_dict=True, cpu_offload=world_size() > 1))


def load_optimizer_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                         state: dict) -> None:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    optimizer.zero_grad(set_to_none=True)    # lets torch initialise empty state before loading
    set_optimizer_state_dict(model, optimizer, state,
                             options=StateDictOptions(full_state_dict=True))


def destroy() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
