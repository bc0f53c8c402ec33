"""`drmas check numerics`: a fingerprint of this machine's float32 training arithmetic.

It trains the default profile's small model shape (random weights, a 300-token vocabulary)
for 30 AdamW steps on fixed random tokens, in float32, and prints the SHA-256 of the final
weights beside the CPU kernels in use. The ops are the ones a warm start runs (MKL's matrix
products, PyTorch's attention, RMS norm, softmax, cross-entropy, AdamW), so two machines that
print the same fingerprint with the same torch build, threads and `cpu_kernels` are very
likely to compute the default profile's numbers bit for bit alike; two different
fingerprints mean its tables will differ as another warm-start seed would make them.
docs/results.md lists the fingerprints measured so far.
"""

from __future__ import annotations

import hashlib
import time

STEPS, BATCH, LENGTH, VOCAB = 30, 8, 100, 300




def fingerprint(threads: int = 1, steps: int = STEPS) -> dict:
    """Train the fixed model; return the loss, the weights' SHA-256 and what computed them."""
    import torch

    from drmas.bench.models import SHAPES
    from drmas.models.kernels import cpu_name, in_use
    from drmas.models.startup import prepare_process
    from drmas.models.tiny import tiny_model
    from drmas.train.optimizer import adamw

    prepare_process(threads)
    model = tiny_model(SHAPES["small"], VOCAB, seed=0)
    opt = adamw(model.parameters(), lr=3e-3)
    tokens = torch.Generator().manual_seed(1)
    t0 = time.perf_counter()
    for _ in range(steps):
        ids = torch.randint(0, VOCAB, (BATCH, LENGTH), generator=tokens)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    seconds = time.perf_counter() - t0
    digest = hashlib.sha256()
    for name, value in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(value.detach().contiguous().numpy().tobytes())
    return {"fingerprint": digest.hexdigest()[:16], "loss": loss.detach().item(),
            "kernels": in_use(), "threads": threads, "steps": steps, "seconds": seconds,
            "torch": torch.__version__, "cpu": cpu_name()}


def check_numerics(setting: str, threads: int = 1) -> dict:
    """Print the fingerprint (the CPU kernels were pinned by the caller, before torch ran)."""
    from drmas.models.kernels import check

    result = fingerprint(threads)
    print(f"drmas check numerics: {result['cpu']}, torch {result['torch']}, "
          f"{result['threads']} thread(s)")
    print(check(setting))
    print(f"loss after {result['steps']} float32 steps: {result['loss']:.10f} "
          f"({result['seconds']:.1f} s)")
    print(f"fingerprint: {result['fingerprint']}")
    return result
