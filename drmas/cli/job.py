"""What a job's arguments resolve to: the profile config (with the suite's overrides and
`--threads` applied), the benchmark suite, the CPU kernels, torch's threads and determinism,
the retriever of a searching suite, and the agent demonstrations of the warm start."""

from __future__ import annotations

from pathlib import Path


def load_config(args):
    """The profile config, with the `suite_overrides` of `--suite` (when the command takes
    one) applied; `--threads` (Snakemake's grant for the job) overrides `threads`. Its
    per-agent blocks must name agents some MAS has (the workflow checks this at parse time
    against its suites; a command run by hand gets the same protection here)."""
    import dataclasses

    from drmas.config.profile import load
    from drmas.config.suites import check_agents_exist

    cfg = load(args.config)
    check_agents_exist(cfg)
    if getattr(args, "suite", None):
        cfg = cfg.for_suite(load_suite(args).name)
    threads = getattr(args, "threads", None)
    return dataclasses.replace(cfg, threads=threads) if threads else cfg


def load_suite(args):
    """The benchmark suite of `--suite`."""
    from drmas.config.suites import load_suite as load
    from drmas.data.io import read_yaml

    if Path(args.suite).is_file():      # a YAML syntax error: one line with file:line:column
        read_yaml(args.suite, what="benchmark file")
    return load(args.suite)


def pin_cpu_kernels(args) -> None:
    """The CPU kernels of `--cpu-kernels` or of the profile's `cpu_kernels`, set before the
    command runs any torch kernel (each library reads its variable once, at first use;
    drmas/models/kernels.py). Commands without either keep the environment's."""
    from drmas.models.kernels import pin

    setting = getattr(args, "cpu_kernels", None)
    if setting is None and isinstance(getattr(args, "config", None), str):
        from drmas.config.profile import load

        setting = load(args.config).cpu_kernels
    if setting is not None:
        pin(setting)


def setup_torch(cfg) -> None:
    """Threads and determinism for a job that runs beside others on a small machine; the job
    log names the CPU kernels in use (an error if the profile's `cpu_kernels` did not take)."""
    from drmas.models.kernels import check
    from drmas.models.startup import prepare_process

    prepare_process(cfg.threads)
    print(check(cfg.cpu_kernels), flush=True)    # stdout: stderr is a failing job's one line


def retriever(args, suite, cfg=None):
    """The suite's retriever: `--index` in process, `--retriever-url`, or none."""
    from drmas.rollout.mas import make_retriever_for

    return make_retriever_for(suite, getattr(args, "index", None), getattr(args, "retriever_url", None),
                              settings=cfg.retrieval if cfg is not None else None)


def demonstrations(args, cfg, suite, rows, seed, prompt_set: str = "compact",
                   mistake_rate: float | None = None):
    """The suite's agent demonstrations (role, messages, reply) on `rows`, in `prompt_set`'s
    prompts (compact: the tiny models'), with `mistake_rate` (default: the profile's)."""
    from drmas.config.suites import mas_options
    from drmas.registry import DEMONSTRATIONS

    rate = cfg.warmstart.mistake_rate if mistake_rate is None else mistake_rate
    return DEMONSTRATIONS.get(suite.mas)(rows, seed=seed, mistake_rate=rate,
                                         retriever=retriever(args, suite, cfg),
                                         options=mas_options(cfg, suite), prompt_set=prompt_set)
