"""The report commands: `table` (paper-style tables from scores.json files, and the
ablation, stability and efficiency tables from run folders), `plot` (figures from runs) and
`predict` (Lemma 4.2's prediction for a batch drawn from an evaluation, before RL runs)."""

from __future__ import annotations

from drmas.cli.arguments import add_command, config_key, output_folder, output_prefix
from drmas.cli.job import load_config, load_suite

SPIKE_K_HELP = ("a grad-norm spike exceeds this many times the running median "
                "(default: the config's report.spike_k)")


def cmd_table(args) -> None:
    from drmas.cli.inputs import check_run, check_run_set, check_score_set, check_scores
    from drmas.report.tables import write_table

    cfg, suite = load_config(args), load_suite(args)
    check_score_set(args.scores, [check_scores(path) for path in args.scores], suite.name)
    for run in args.runs or []:
        check_run(run)
    check_run_set(args.runs or [], suite.name)
    write_table(cfg, suite, args.scores, args.out, run_dirs=args.runs,
                spike_k=_given(args.spike_k, cfg.report.spike_k),
                n_boot=_given(args.n_boot, cfg.report.n_boot))


def cmd_plot(args) -> None:
    from drmas.cli.inputs import check_run, check_run_set
    from drmas.report.figures import write_figures

    cfg, suite = load_config(args), load_suite(args)
    for run in args.runs:
        check_run(run)
    check_run_set(args.runs, suite.name)
    write_figures(cfg, suite, args.runs, args.out, spike_k=_given(args.spike_k, cfg.report.spike_k))


def cmd_predict(args) -> None:
    import json

    from drmas.config.groups import plan_groups
    from drmas.data.io import atomic_write_text
    from drmas.report.lemma_batch import format_prediction, predict_from_samples, read_samples

    cfg, suite = load_config(args), load_suite(args)
    samples = read_samples(args.samples)
    assignment = args.assignment or _evaluated_assignment(args.samples)
    plan = plan_groups(cfg, assignment, suite.agents)
    agent_group = {a: g for g, spec in plan.items() for a in spec["agents"]}
    result = predict_from_samples(samples, _given(args.group_n, cfg.train.group_n),
                                  suite.invalid_penalty, agent_group)
    result.update(samples=str(args.samples), suite=suite.name, assignment=assignment)
    print(format_prediction(result))
    if args.out:
        atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")


def _evaluated_assignment(samples_path) -> str:
    """The assignment the evaluation beside `samples_path` names (its scores.json's meta)."""
    from pathlib import Path

    from drmas.data.io import read_json
    from drmas.errors import DataError

    scores = Path(samples_path).with_name("scores.json")
    try:
        assignment = read_json(scores, what="evaluation's scores.json")["meta"]["assignment"]
    except (DataError, KeyError, TypeError):
        assignment = None
    if not isinstance(assignment, str):
        raise DataError(f"{scores}: no evaluation metadata to name the assignment; give --assignment")
    return assignment


def _given(flag, config_value):
    """The flag's value when it was given (checked against its key's bounds by
    `config_key`), else the config's: never `or`, which would let a 0 fall through."""
    return config_value if flag is None else flag


def add_commands(sub) -> None:
    """table, plot, predict."""
    sp = add_command(sub, "table", cmd_table, "paper-style table from scores.json files")
    sp.add_argument("--scores", nargs="+", required=True,
                    help="scores.json files written by `drmas evaluate` (any order)")
    sp.add_argument("--out", required=True, type=output_prefix, help="output path without extension")
    sp.add_argument("--runs", nargs="+", default=None,
                    help="run folders: adds the ablation, stability and efficiency tables (<out>_ablations.csv, <out>_stability.csv, <out>_efficiency.csv)")
    sp.add_argument("--spike-k", type=config_key("report", "spike_k"), default=None, help=SPIKE_K_HELP)
    sp.add_argument("--n-boot", type=config_key("report", "n_boot"), default=None,
                    help="bootstrap replicates of the confidence intervals (default: the "
                         "config's report.n_boot)")

    sp = add_command(sub, "plot", cmd_plot,
                     "grad-norm, reward, theory-check and diagnostics figures from runs")
    sp.add_argument("--runs", nargs="+", required=True, help="run folders")
    sp.add_argument("--out", required=True, type=output_folder, help="figures folder")
    sp.add_argument("--spike-k", type=config_key("report", "spike_k"), default=None, help=SPIKE_K_HELP)

    sp = add_command(sub, "predict", cmd_predict,
                     "Lemma 4.2's GRPO / Dr. MAS gradient ratios per agent for an RL batch drawn "
                     "from an evaluation's samples")
    sp.add_argument("--samples", required=True,
                    help="samples.jsonl written by `drmas evaluate` (the base models' before RL)")
    sp.add_argument("--assignment", default=None,
                    help="assignment whose worker groups order the batch (default: the one "
                         "named by the scores.json beside the samples)")
    sp.add_argument("--group-n", type=config_key("train", "group_n"), default=None,
                    help="samples per prompt group (default: the config's train.group_n)")
    sp.add_argument("--out", default=None, help="also write the prediction as JSON here")
