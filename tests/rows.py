"""Synthetic rollout rows for a worker group's update, built on the group's own tokenizer and
model, and the gradient that update hands to the optimiser."""

import random

import torch

from drmas.rollout.base import Sampling
from drmas.train.logprobs import pack, response_logprobs

AGENTS = ["solver", "verifier"]          # the agents engine_rows deals rows to


def solver_rows(group, lengths=(3, 5, 7, 9)):
    """Rows of one agent with distinct lengths (so the length-sorted micro-batches are the
    pairs (0, 1), (2, 3)) and stale behaviour logprobs (ratios away from 1)."""
    tok = group.tokenizer
    prompt = tok("What is 2 + 3?", add_special_tokens=False)["input_ids"]
    rows = []
    for i, n in enumerate(lengths):
        response = (tok("2 + 3 = 5 so the answer is 5", add_special_tokens=False)["input_ids"] * 3)[:n]
        ids, attn, resp = pack([prompt], [response], tok.pad_token_id)
        with torch.no_grad():
            lp, _ = response_logprobs(group.model, ids, attn)
        old = lp[0][resp[0] > 0] + torch.linspace(-0.4, 0.4, n)
        rows.append({"agent": "solver", "prompt_ids": prompt, "response_ids": response,
                     "logprobs": old.tolist(), "advantage": [1.0, -0.5, 0.8, -1.2][i]})
    return rows


def engine_rows(group, n=7, seed=0):
    """Real prompt/response ids and engine logprobs from `group`, random advantages; the
    rows go to AGENTS (every third to the verifier)."""
    prompts = [[{"role": "user", "content": f"What is {i} + {i + 1}?"}] for i in range(n)]
    gens = group.generate(prompts, Sampling(1.0, 1.0, 8), seed=seed)
    rng = random.Random(seed)
    return [{"agent": AGENTS[i % 3 == 0], "prompt_ids": g.prompt_ids,
             "response_ids": g.response_ids, "logprobs": g.logprobs,
             "advantage": rng.uniform(-1, 1)} for i, g in enumerate(gens)]


def captured_gradient(group, rows):
    """The gradient `update` hands to the optimiser (its step replaced by a recorder)."""
    seen = []
    group.optimizer.step = lambda: seen.append([p.grad.detach().clone() for p in group.params])
    group.update(rows, seed=0)
    return seen[0]
