"""The transformers rollout engine: batched sampling with a KV cache and left padding.

A hand-written decode loop rather than `model.generate`, because RL needs exactly three
things `generate` makes awkward: per-token logprobs of the sampled tokens, an explicit seeded
generator (same seed -> same samples on CPU), and top-p applied the same way every time.
"""

from __future__ import annotations

from typing import Sequence

import torch

from drmas.rollout.base import Generation, Sampling


def sample_tokens(logits: torch.Tensor, sampling: Sampling,
                  generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row; return (tokens, logprob of each under softmax(logits / T))."""
    logits = logits.float() / max(sampling.temperature, 1e-6)
    logprobs = torch.log_softmax(logits, dim=-1)
    if sampling.temperature <= 0:
        tokens = logits.argmax(-1)
    else:
        probs = logprobs.exp()
        if sampling.top_p < 1.0:
            sorted_p, order = probs.sort(dim=-1, descending=True)
            keep = sorted_p.cumsum(-1) - sorted_p < sampling.top_p   # always keeps the top token
            sorted_p = sorted_p * keep
            probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
        tokens = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    return tokens, logprobs.gather(-1, tokens[:, None]).squeeze(-1)


class HFEngine:
    """Generates with a transformers causal LM it shares with the trainer (no weight copy)."""

    def __init__(self, model, tokenizer, batch_size: int = 256):
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id

    @torch.no_grad()
    def generate(self, prompts: Sequence[list[int]], sampling: Sampling,
                 seed: int | None = None) -> list[Generation]:
        generator = torch.Generator().manual_seed(0 if seed is None else seed)
        out: list[Generation] = []
        for start in range(0, len(prompts), self.batch_size):
            out += self._generate_batch(prompts[start:start + self.batch_size], sampling, generator)
        return out

    def _generate_batch(self, prompts, sampling: Sampling, generator) -> list[Generation]:
        was_training = self.model.training
        self.model.eval()
        batch, width = len(prompts), max(len(p) for p in prompts)
        ids = torch.full((batch, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((batch, width), dtype=torch.long)
        for i, p in enumerate(prompts):                      # left padding
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        past, new_tokens, new_logprobs = None, [], []
        done = torch.zeros(batch, dtype=torch.bool)
        step_ids = ids
        for _ in range(sampling.max_tokens):
            out = self.model(input_ids=step_ids, attention_mask=mask, position_ids=positions,
                             past_key_values=past, use_cache=True)
            past = out.past_key_values
            tokens, logprobs = sample_tokens(out.logits[:, -1, :], sampling, generator)
            tokens = torch.where(done, torch.full_like(tokens, self.pad_id), tokens)
            new_tokens.append(tokens)
            new_logprobs.append(logprobs)
            done = done | (tokens == self.eos_id)
            if bool(done.all()):
                break
            step_ids = tokens[:, None]
            mask = torch.cat([mask, torch.ones((batch, 1), dtype=torch.long)], dim=1)
            positions = positions[:, -1:] + 1
        self.model.train(was_training)
        return self._unpack(prompts, torch.stack(new_tokens, 1), torch.stack(new_logprobs, 1))

    def _unpack(self, prompts, tokens: torch.Tensor, logprobs: torch.Tensor) -> list[Generation]:
        gens = []
        for i, prompt in enumerate(prompts):
            row = tokens[i].tolist()
            finished = self.eos_id in row
            length = row.index(self.eos_id) + 1 if finished else len(row)
            response = row[:length]
            text = self.tokenizer.decode(response, skip_special_tokens=True)
            gens.append(Generation(text, list(prompt), response,
                                   logprobs[i, :length].tolist(), finished))
        return gens
