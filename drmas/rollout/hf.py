"""The transformers rollout engine: batched sampling with a KV cache and left padding.

A hand-written decode loop rather than `model.generate`, because RL needs exactly three
things `generate` makes awkward: per-token logprobs of the sampled tokens, an explicit seeded
generator (same seed -> same samples on a given device), and top-p applied the same way
every time. Every tensor it makes lives on the model's device, the generator too. What makes
it fast on a CPU (a preallocated KV cache, single-row attention that does not copy the cache,
one prefill per distinct prompt) is in `decode.py`; the single-token steps of a Qwen2 or
Llama model skip transformers' module calls (`decode_step.py`, the same bits); rows that
have finished leave the batch (`worth_dropping`), and top-p looks at the top entries only
(`nucleus`). Only the last position's logits are computed (`logits_to_keep=1`): at prefill,
the logits of every prompt position would be batch x prompt x vocabulary (15 GB in bf16 for
160 SmolLM2 prompts of 1000 tokens).

It generates with the trainer's own model when the dtypes agree (no copy, nothing to sync);
otherwise (bf16 rollout of float32 master weights) with its own cast copy, refreshed by
`update_weights`. While the group trains, `sleep` drops that copy's weights instead of moving
them to the host: the trainer refreshes every weight after its update anyway (`wake`, then
`update_weights`), so a copy to the host and back would be overwritten on arrival (0.68 s of a
2.1 s update on the 0.5B shape on an H200).
"""

from __future__ import annotations

import copy
from typing import Iterable, Sequence

import torch

from drmas.rollout import decode_step
from drmas.rollout.base import Generation, Sampling
from drmas.rollout.decode import DecodeMask, decoding, distinct_prompts, preallocated_cache


def sample_tokens(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator,
                  present: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row; return (tokens, logprob of each under softmax(logits / T)).
    Greedy (T <= 0): the argmax and its logprob under softmax(logits). `present`: see `draw`."""
    greedy = sampling.temperature <= 0
    logits = logits.float() / (1.0 if greedy else sampling.temperature)
    logprobs = torch.log_softmax(logits, dim=-1)
    if greedy:
        tokens = logits.argmax(-1)
    else:
        probs = logprobs.exp()
        if sampling.top_p < 1.0:
            probs = nucleus(probs, sampling.top_p)
        tokens = draw(probs, generator, present)
    return tokens, logprobs.gather(-1, tokens[:, None]).squeeze(-1)


def sorted_nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """`probs` zero outside the top-p nucleus, by a full sort: in descending order, an entry is
    kept when the mass before it is < top_p (so the top entry always is)."""
    sorted_p, order = probs.sort(dim=-1, descending=True)
    keep = sorted_p.cumsum(-1) - sorted_p < top_p
    return torch.zeros_like(probs).scatter_(-1, order, sorted_p * keep)


#: `nucleus` looks at this many top entries first, 4 times more at each round
TOP_K = 64
#: mass above top_p that the top k must hold to settle a row: far above float32 rounding
MARGIN = 1e-4


def nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """What `sorted_nucleus` returns, bit for bit, without sorting the whole vocabulary: the
    top k entries (`topk`, k = 64, 256, ... per row until they hold top_p + MARGIN of the
    mass; a full sort once k reaches the vocabulary). A nucleus is mostly a few tokens, and a
    small `topk` is about one pass over a row where a sort of SmolLM2's 49,152 entries makes
    about log2(49,152) = 16.

    Why it is the same set and the same values (on a CPU):
    - `topk`'s values are the first k of the sorted values (one descending sequence, whatever
      order ties come in), and a CPU cumulative sum is sequential, so the mass before each of
      them, and the keep test `cum - p < top_p`, are those of the full sort, position for
      position.
    - no entry past the k-th is kept: the mass before it is at least the top k's mass less a
      rounding or two (1e-7), and that is >= top_p + MARGIN.
    - which entries are kept can still depend on the order of ties, which `sort` leaves
      unspecified (a CPU's `std::sort`). When the kept positions are a prefix whose last value
      `v` no entry outside it shares, the kept set is {p >= v} whatever that order: taken
      when it has as many entries as positions kept. Otherwise (a tie across the cut, common
      with bf16 logits in a long tail; or a kept set that is not a prefix, possible only
      within rounding of top_p) the row goes to `sorted_nucleus` itself.
    Kept entries keep their value and the rest are +0, as after the scatter, so `draw`'s
    cumulative sum over the vocabulary is unchanged. On a GPU the scan's rounding of a
    k-prefix may differ from the full row's: the kept set can then differ where the mass
    before an entry is within rounding of top_p."""
    out = torch.zeros_like(probs)
    rows = torch.arange(probs.shape[0], device=probs.device)
    k = TOP_K
    while len(rows):
        p = probs[rows]
        if k >= probs.shape[-1]:
            out[rows] = sorted_nucleus(p, top_p)
            break
        top = p.topk(k, dim=-1).values
        cum = top.cumsum(-1)
        keep = cum - top < top_p
        kept = keep.sum(-1, keepdim=True)
        chosen = p >= top.gather(-1, (kept - 1).clamp(min=0))
        prefix = (keep == (torch.arange(k, device=p.device) < kept)).all(-1)
        exact = prefix & (kept[:, 0] > 0) & (chosen.sum(-1) == kept[:, 0])
        settled = cum[:, -1] >= top_p + MARGIN
        ok, tie = settled & exact, settled & ~exact
        out[rows[ok]] = torch.where(chosen[ok], p[ok], 0.0)
        if bool(tie.any()):
            out[rows[tie]] = sorted_nucleus(p[tie], top_p)
        rows, k = rows[~settled], 4 * k
    return out


def draw(probs: torch.Tensor, generator: torch.Generator,
         present: torch.Tensor | None = None) -> torch.Tensor:
    """One index per row of `probs` (non-negative, any positive total), drawn with probability
    proportional to its entry: the row's cumulative sum inverted at one uniform draw.

    The same distribution as `torch.multinomial(probs, 1)`, with one random number per row
    where torch's CPU kernel draws one exponential per vocabulary entry: for 64 rows of
    SmolLM2's 49,152 entries 1.6 ms against 63 ms a decode step, for the tiny models' ~500
    0.03 against 0.7 ms (2 cores, AMD EPYC). An entry's chance is its step in the float32
    cumulative sum, so it is exact up to one rounding of that sum; a zero entry (outside top-p)
    is a zero step in a CPU's sequential sum and is never drawn (the first index whose sum
    exceeds the draw); a GPU's parallel scan may give it one rounding's width, a chance of
    about 1e-7.

    `present` (bool, one entry per row of the whole batch): the rows of `probs` are the batch's
    rows marked True, in order. A uniform is drawn for every row of the batch and the present
    rows use theirs, so that a row's draw at each step is the same whichever other rows are
    still decoded."""
    cdf = probs.cumsum(-1)
    total = cdf[:, -1:]
    shape = total.shape if present is None else (len(present), 1)
    u = torch.rand(shape, generator=generator, device=probs.device, dtype=cdf.dtype)
    u = (u if present is None else u[present]) * total
    u = torch.minimum(u, torch.nextafter(total, torch.zeros_like(total)))   # keep u < total
    return torch.searchsorted(cdf, u, right=True).squeeze(-1)


def worth_dropping(finished: int, rows: int) -> bool:
    """Whether to drop the `finished` rows (EOS emitted) from a decode batch of `rows`.

    Dropping copies the written part of the kept rows' KV cache once, about the memory that
    one decode step's attention reads for them, and spares the dropped rows' share of every
    later step. Done when at least a quarter of the rows finished, it pays back within a few
    steps, and a batch of n rows is compacted at most about log(n) / log(4/3) times (19 for
    256 rows); one row at a time would copy the cache at almost every step."""
    return finished > 0 and 4 * finished >= rows


def model_device(model) -> torch.device:
    return next(model.parameters()).device


def plain_copy(model, dtype: torch.dtype):
    """A frozen copy of `model` in `dtype`, LoRA adapters merged (plain transformers names)."""
    if hasattr(model, "merge_and_unload"):
        return copy.deepcopy(model).merge_and_unload().to(dtype).requires_grad_(False)
    return copy.deepcopy(model).to(dtype).requires_grad_(False)


class HFEngine:
    """Generates with a transformers causal LM: the trainer's own (`dtype` None or equal to
    the model's) or a copy in `dtype`."""

    kind = "hf"

    def __init__(self, model, tokenizer, batch_size: int = 256, dtype: torch.dtype | None = None):
        self.owns = dtype is not None and dtype != next(model.parameters()).dtype
        self.model = plain_copy(model, dtype) if self.owns else model
        self.tokenizer, self.batch_size = tokenizer, batch_size
        self.dtype = next(self.model.parameters()).dtype
        self.device = model_device(self.model)
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id
        self.shapes = None          # while asleep: the dropped weights' shapes
        self.dropped = False        # weights dropped and not yet refilled by update_weights

    # -- weights and memory ----------------------------------------------------------------
    @property
    def needs_weights(self) -> bool:
        return self.owns

    @torch.no_grad()
    def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        if not self.owns:
            return
        own = self.model.state_dict()
        written = set()
        for name, value in weights:
            if name not in own:
                raise KeyError(f"the engine's model has no weight {name!r}")
            own[name].copy_(value)
            written.add(own[name].data_ptr())
        if self.dropped:
            missing = [n for n, p in self.model.named_parameters()
                       if p.data_ptr() not in written]
            if missing:
                raise RuntimeError(f"the engine's weights were dropped by sleep and the update "
                                   f"did not refill {len(missing)} of them ({missing[0]}, ...)")
            self.dropped = False

    def sleep(self) -> None:
        """Drop the copy's weights (their storage freed, their shapes kept): `wake` then
        `update_weights` with every weight brings them back. Nothing to do without a copy."""
        if not self.owns or self.shapes is not None:
            return
        self.shapes = {}
        for name, p in self.model.named_parameters():
            self.shapes[name] = p.shape
            p.data = p.new_empty(0)
        self.dropped = True
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def wake(self) -> None:
        """Storage for the dropped weights, on the device and not yet written: the next call
        must be `update_weights` (`generate` refuses until then)."""
        if self.shapes is None:
            return
        for name, p in self.model.named_parameters():
            p.data = p.new_empty(self.shapes[name])
        self.shapes = None

    # -- sampling --------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, prompts: Sequence[list[int]], sampling: Sampling,
                 seed: int | None = None) -> list[Generation]:
        if self.dropped:
            raise RuntimeError("the engine's weights were dropped by sleep: wake and "
                               "update_weights before generate")
        generator = torch.Generator(device=self.device).manual_seed(0 if seed is None else seed)
        out: list[Generation] = []
        for start in range(0, len(prompts), self.batch_size):
            out += self._generate_batch(prompts[start:start + self.batch_size], sampling, generator)
        return out

    def _generate_batch(self, prompts, sampling: Sampling, generator) -> list[Generation]:
        was_training = self.model.training
        self.model.eval()
        dev = self.device
        batch, width = len(prompts), max(len(p) for p in prompts)
        unique, index = distinct_prompts(prompts)
        ids = self._left_padded(unique, width)
        prompt_mask = (ids != -1).long()
        ids = ids.masked_fill(prompt_mask == 0, self.pad_id)
        positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
        # the mask spans the cache's whole capacity: left padding off, every response slot on
        # (a slot not yet written is after the current position, so causality hides it)
        mask = torch.cat([prompt_mask, prompt_mask.new_ones((len(unique), sampling.max_tokens))], 1)
        past = preallocated_cache(self.model, width + sampling.max_tokens)
        with decoding(self.model) as ours:
            direct = ours and decode_step.supported(self.model)
            # one prefill per distinct prompt; its cache rows are then repeated per sample
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                             past_key_values=past, use_cache=True, logits_to_keep=1)
            logits = out.logits[:, -1, :]
            if len(unique) < batch:
                counts = torch.bincount(torch.tensor(index), minlength=len(unique)).to(dev)
                past.batch_repeat_interleave(counts)     # row i -> counts[i] rows, per layer
                logits = logits.repeat_interleave(counts, dim=0)
                mask = mask.repeat_interleave(counts, dim=0)
                positions = positions.repeat_interleave(counts, dim=0)
            # decode_attention takes its 4-D mask (DecodeMask); other attentions the 2-D one
            decode_mask = DecodeMask(mask[:, :width], sampling.max_tokens) if ours else None
            new_tokens = torch.full((batch, sampling.max_tokens), self.pad_id, device=dev)
            new_logprobs = torch.zeros((batch, sampling.max_tokens), dtype=torch.float32, device=dev)
            rows = torch.arange(batch, device=dev)     # the batch row of each row decoded
            present = torch.ones(batch, dtype=torch.bool, device=dev)
            done = torch.zeros(batch, dtype=torch.bool, device=dev)   # per row decoded
            for step in range(sampling.max_tokens):
                if step and direct:                   # the same bits without the modules
                    logits = decode_step.logits(self.model, tokens[:, None],
                                                decode_mask.at(step), positions, past)
                elif step:
                    out = self.model(input_ids=tokens[:, None],
                                     attention_mask=decode_mask.at(step) if ours else mask,
                                     position_ids=positions, past_key_values=past,
                                     use_cache=True, logits_to_keep=1)
                    logits = out.logits[:, -1, :]
                tokens, logprobs = sample_tokens(logits, sampling, generator, present)
                tokens = torch.where(done, torch.full_like(tokens, self.pad_id), tokens)
                new_tokens[rows, step] = tokens
                new_logprobs[rows, step] = logprobs
                done = done | (tokens == self.eos_id)
                if bool(done.all()):
                    break
                positions = positions[:, -1:] + 1
                if worth_dropping(int(done.sum()), len(rows)):   # finished rows leave
                    keep = (~done).nonzero().squeeze(-1)
                    present[rows[done]] = False
                    past.batch_select_indices(keep)
                    if ours:
                        decode_mask.select(keep)
                    else:
                        mask = mask[keep]
                    rows, tokens, positions, done = rows[keep], tokens[keep], positions[keep], done[keep]
        self.model.train(was_training)
        return self._unpack(prompts, new_tokens[:, :step + 1].cpu(),
                            new_logprobs[:, :step + 1].cpu())

    def _left_padded(self, prompts, width: int) -> torch.Tensor:
        """[len(prompts), width] token ids on the engine's device, -1 where padding."""
        ids = torch.full((len(prompts), width), -1, dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
        return ids.to(self.device)

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
