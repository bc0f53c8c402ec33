"""The frozen reference model of a worker group, for the KL penalty in the reward.

verl keeps a reference policy beside each actor: the base weights, never trained, that the
KL term measures the policy's drift from (`algorithm.use_kl_in_reward`). Here each group
keeps a full, unsharded copy of the weights it was built from, taken before LoRA adapters
are added and before the training copy is sharded, so it is the base model whatever the
group trains. Every rank of a group holds one, so each rank can score any share of the rows
without collectives.

A resumed run rebuilds the reference from the same base model (the run identity records the
tiny models' weights); `digest` lets the trainer check, on resume, that the reference is the
one the checkpoint was made with (a pretrained model replaced at the same path would not be).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence

import torch

from drmas.train.prefix import row_chunks, rows_logprobs


class ReferencePolicy:
    """Teacher-forced logprobs of rows' responses under the frozen base weights."""

    def __init__(self, model, pad_id: int, settings, device: torch.device):
        self.model = copy.deepcopy(model).requires_grad_(False).to(device).eval()
        self.pad_id, self.settings, self.device = pad_id, settings, device
        self._digest: str | None = None

    @classmethod
    def build(cls, model, pad_id: int, settings, device, trainable: bool = True):
        """A reference for a trainable group whose settings put the KL in the reward, else
        None (no memory spent)."""
        if not (trainable and getattr(settings, "kl_in_reward", False)):
            return None
        return cls(model, pad_id, settings, device)

    @torch.no_grad()
    def logprobs(self, rows: Sequence[dict]) -> list[list[float]]:
        """Per row (`prompt_ids`, `response_ids`), the reference logprob of every response
        token at the group's sampling temperature (as the behaviour logprobs are), in row
        order; micro-batched like the update (`micro_batch_rows`, `micro_batch_tokens`), each
        shared prefix run once under `shared_prefix` (drmas/train/prefix.py)."""
        s = self.settings
        lengths = [len(r["prompt_ids"]) + len(r["response_ids"]) for r in rows]
        shared = s.shared_prefix
        prompts = [r["prompt_ids"] for r in rows] if shared else None
        out: list[list[float]] = [[] for _ in rows]
        for chunk in row_chunks(lengths, s.micro_batch_rows, s.micro_batch_tokens, prompts):
            part = [rows[i] for i in chunk]
            lp, _, resp = rows_logprobs(self.model, [r["prompt_ids"] for r in part],
                                        [r["response_ids"] for r in part], self.pad_id,
                                        s.temperature, shared=shared, device=self.device)
            lp, resp = lp.cpu(), resp.cpu()
            for b, i in enumerate(chunk):
                out[i] = lp[b][resp[b] > 0].tolist()
        return out

    def digest(self) -> str:
        """SHA-256 (16 hex digits) of the reference weights, by parameter name."""
        if self._digest is None:
            h = hashlib.sha256()
            for name, t in sorted(self.model.state_dict().items()):
                h.update(name.encode())
                h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
            self._digest = h.hexdigest()[:16]
        return self._digest
