"""A worker group: one model with its optimiser and its rollout engine.

Agents that share a model share a group; each group trains only on its own agents' rows.
The trainer talks to a group through four calls with plain-data arguments (`generate`,
`update`, `save`, `load`), so the same object can live in the driver process (`LocalGroup`)
or behind Ray actors without the trainer changing.
"""

from __future__ import annotations

import random
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

import torch

from drmas.agents.base import Messages
from drmas.algos.loss import grad_norm_and_clip, policy_loss
from drmas.config import TrainConfig
from drmas.modeling import load_model, load_tokenizer
from drmas.rollout.base import Generation, Sampling
from drmas.rollout.hf import HFEngine
from drmas.train.logprobs import pack, response_logprobs
from drmas.train.sft import encode_prompt


def flat_grad(params: list[torch.nn.Parameter]) -> torch.Tensor:
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                      for p in params])


class LocalGroup:
    """One worker group in this process (W = 1)."""

    def __init__(self, name: str, model_path: str | Path, agents: Sequence[str],
                 settings: TrainConfig, eval_batch: int = 256, trainable: bool = True):
        self.name, self.agents, self.settings = name, list(agents), settings
        self.tokenizer = load_tokenizer(model_path)
        self.model = load_model(model_path)
        self.model.eval()
        self.engine = HFEngine(self.model, self.tokenizer, batch_size=eval_batch)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = (torch.optim.AdamW(self.params, lr=settings.lr,
                                            weight_decay=settings.weight_decay)
                          if trainable else None)

    # -- rollout -------------------------------------------------------------------------
    def generate(self, prompts: Sequence[Messages], sampling: Sampling, seed: int) -> list[Generation]:
        """Tokenise with this group's own tokenizer and chat template, then sample."""
        ids = [encode_prompt(self.tokenizer, m) for m in prompts]
        return self.engine.generate(ids, sampling, seed=seed)

    # -- training ------------------------------------------------------------------------
    def update(self, rows: list[dict], seed: int) -> dict:
        """PPO-clip update on this group's rows (`prompt_ids`, `response_ids`, `advantage`,
        `agent`); `settings.ppo_mini_batches` optimiser steps, micro-batched.

        Returns per-group metrics and, per agent, the norm of that agent's share of the
        gradient (before clipping), averaged over mini-batches: with a shared model the
        group norm alone would hide which agent spiked.
        """
        s = self.settings
        if not rows:
            return {"rows": 0}
        if s.recompute_logprobs:
            old = self._old_logprobs(rows)
        else:   # the engine shares these weights: its logprobs are the behaviour policy's
            old = [torch.tensor(r["logprobs"], dtype=torch.float32) for r in rows]
        order = list(range(len(rows)))
        random.Random(seed).shuffle(order)
        n_mini = min(s.ppo_mini_batches, len(rows))
        minis = [order[i::n_mini] for i in range(n_mini)]
        totals = {"loss": 0.0, "clip_frac": 0.0, "approx_kl": 0.0, "entropy": 0.0, "tokens": 0}
        norms, agent_norms, skipped = [], {a: [] for a in self.agents}, 0
        self.model.train()
        for mini in minis:
            denom = float(sum(len(rows[i]["response_ids"]) for i in mini))
            self.optimizer.zero_grad(set_to_none=True)
            before = flat_grad(self.params)
            for agent in self.agents:                   # agent by agent: exact per-agent norms
                idx = [i for i in mini if rows[i]["agent"] == agent]
                for start in range(0, len(idx), s.micro_batch_rows):
                    self._backward([rows[i] for i in idx[start:start + s.micro_batch_rows]],
                                   [old[i] for i in idx[start:start + s.micro_batch_rows]],
                                   denom, totals)
                if idx:
                    after = flat_grad(self.params)
                    agent_norms[agent].append(float((after - before).norm()))
                    before = after
            norm, finite = grad_norm_and_clip(self.params, s.grad_clip)
            norms.append(norm)
            if finite:
                self.optimizer.step()
            else:
                skipped += 1
        self.model.eval()
        tokens = max(totals.pop("tokens"), 1)
        out = {k: v / tokens for k, v in totals.items()}
        out.update(rows=len(rows), grad_norm=sum(norms) / len(norms), grad_norm_max=max(norms),
                   skipped_steps=skipped,
                   agent_grad_norm={a: sum(v) / len(v) for a, v in agent_norms.items() if v})
        return out

    @torch.no_grad()
    def _old_logprobs(self, rows: list[dict]) -> list[torch.Tensor]:
        """Logprobs of the behaviour policy (the weights before this update), per row."""
        out = []
        for start in range(0, len(rows), self.settings.micro_batch_rows):
            chunk = rows[start:start + self.settings.micro_batch_rows]
            ids, attn, resp = pack([r["prompt_ids"] for r in chunk],
                                   [r["response_ids"] for r in chunk], self.tokenizer.pad_token_id)
            lp, _ = response_logprobs(self.model, ids, attn, self.settings.temperature)
            out += [lp[b][resp[b] > 0] for b in range(len(chunk))]
        return out

    def _backward(self, rows: list[dict], old: list[torch.Tensor], denom: float, totals: dict):
        if not rows:
            return
        ids, attn, resp = pack([r["prompt_ids"] for r in rows], [r["response_ids"] for r in rows],
                               self.tokenizer.pad_token_id)
        lp, entropy = response_logprobs(self.model, ids, attn, self.settings.temperature,
                                        with_entropy=True)
        old_full = torch.zeros_like(lp)
        for b, o in enumerate(old):
            old_full[b][resp[b] > 0] = o
        adv = torch.tensor([r["advantage"] for r in rows], dtype=torch.float32)
        loss, m = policy_loss(lp, old_full, adv, resp, clip_low=self.settings.clip_low,
                              clip_high=self.settings.clip_high, dual_clip=self.settings.dual_clip,
                              entropy=entropy.detach(), denom=denom)
        loss.backward()
        n = m["n_tokens"]
        totals["loss"] += float(loss.detach()) * denom
        for key in ("clip_frac", "approx_kl", "entropy"):
            totals[key] += m[key] * n
        totals["tokens"] += n

    # -- persistence ---------------------------------------------------------------------
    def save(self, path: str | Path, with_optimizer: bool = True) -> None:
        """Weights as safetensors (`from_pretrained`- and vLLM-loadable) + optimiser state."""
        path = Path(path)
        self.model.save_pretrained(path, safe_serialization=True)
        self.tokenizer.save_pretrained(path)
        if with_optimizer and self.optimizer is not None:
            torch.save({"optimizer": self.optimizer.state_dict(), "settings": asdict(self.settings)},
                       path / "optimizer.pt")

    def load(self, path: str | Path) -> None:
        """Restore weights and optimiser state saved by `save` (resume)."""
        path = Path(path)
        from safetensors.torch import load_file

        state = load_file(str(path / "model.safetensors"))
        self.model.load_state_dict(state, strict=False)
        if self.optimizer is not None and (path / "optimizer.pt").exists():
            self.optimizer.load_state_dict(torch.load(path / "optimizer.pt")["optimizer"])
