# drmas workflow: data -> (index) -> tokenizer/warm start or GGUF conversion -> RL runs -> evaluation
# -> tables, figures.
# `snakemake --cores all` runs the default profile (config/default.yaml); `--configfile
# config/<profile>.yaml` runs another profile instead (profiles never inherit each other's
# keys: every key not in the file takes its default from drmas/config/profile.py). Any key can be
# overridden with `--config KEY=VALUE` (VALUE is YAML: `seeds=[0,1,2]`, `eval={n: 8}`).
# Rules are thin: each calls one `drmas` subcommand (see `drmas --help`). Each rule's
# `params.key` is the slice of the config its job reads (drmas/config/stages.py): a change reruns
# exactly the jobs whose slice changed. See ARCHITECTURE.md, "Reruns".
import os
import re
import sys
from pathlib import Path

import yaml
from snakemake.utils import min_version

min_version("9.0")


# A bad config gets one clear line and a non-zero exit instead of a traceback.
try:
    from drmas.config.profile import workflow_config
    from drmas.config.suites import check_suites, load_suite, suite_path
    from drmas.config import stages
    from drmas.report.names import FIGURES

    CFG = workflow_config(workflow.config_settings.configfiles,
                          workflow.config_settings.config_args or [])
    SUITES = {name: load_suite(suite_path(name)) for name in CFG.suites}
    check_suites(CFG, SUITES)
except Exception as exc:  # drmas ConfigError (one line naming the key) or anything unexpected
    sys.stderr.write(f"drmas config error: {str(exc).strip().splitlines()[0]}\n")
    sys.exit(2)

RES = f"results/{CFG.profile}"
SUITE_CFG = {name: CFG.for_suite(name) for name in SUITES}    # e.g. per-suite assignments
ASSIGNMENTS = list(dict.fromkeys(a for c in SUITE_CFG.values() for a in c.assignments))
# The resolved config every job reads: written when the workflow starts running (never by
# parsing or a dry run). It is not an input of any rule: reruns follow each rule's params.key.
CONFIG = f"{RES}/config.yaml"
METHODS = list(dict.fromkeys(m for c in SUITE_CFG.values() for m in c.methods))
SEEDS = CFG.seeds
WATCHERS = []
WATCH_INTERVAL = float(os.environ.get("DRMAS_WATCH_INTERVAL", 30))


onstart:
    Path(RES).mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(CFG.resolved(), sort_keys=False)
    if not Path(CONFIG).exists() or Path(CONFIG).read_text() != text:
        Path(CONFIG).write_text(text)
    # Jobs report their progress bars to status files; a watcher prints the running jobs
    # (step / total, ETA) to this terminal every DRMAS_WATCH_INTERVAL seconds (default 30;
    # drmas/status/progress.py, drmas/status/watch.py).
    from drmas.status.progress import STATUS_ENV
    from drmas.status.watch import Watcher, status_dir

    os.environ[STATUS_ENV] = str(Path(status_dir(RES)).resolve())
    WATCHERS.append(Watcher(os.environ[STATUS_ENV], interval=WATCH_INTERVAL).start())


onsuccess:
    for watcher in WATCHERS:
        watcher.stop()


onerror:
    for watcher in WATCHERS:
        watcher.stop()


wildcard_constraints:
    suite="|".join(SUITES),
    assignment="|".join(ASSIGNMENTS),
    method="|".join(re.escape(m) for m in METHODS),
    seed=r"\d+",
    model="|".join(CFG.models),


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/index.smk"
include: "rules/convert.smk"
include: "rules/train.smk"
include: "rules/eval.smk"
include: "rules/report.smk"
include: "rules/card.smk"


rule all:
    input:
        # every file of the table rule, so that a table added by a newer drmas gets written
        expand(f"{RES}/tables/{{suite}}{{name}}", suite=SUITES,
               name=[".md", ".tex", ".csv", "_behaviour.csv", "_ablations.csv", "_stability.csv",
                     "_efficiency.csv", "_efficiency.md", "_stats.csv", "_stats.md",
                     "_gradnorm.csv", "_gradnorm.md"]),
        expand(f"{RES}/figures/{{suite}}_{{fig}}.png", suite=SUITES, fig=FIGURES),
        # last: the result card and its comparison with results/reference/<profile>.json
        # (printed; written beside the card; never a failure of the run: docs/cards.md)
        f"{RES}/verify.txt",
    default_target: True
