# drmas workflow: data -> (index) -> tokenizer/warm start -> RL runs -> evaluation -> tables, figures.
# `snakemake --cores all` runs the default profile; `--configfile config/<profile>.yaml` another.
# Rules are thin: each calls one `drmas` subcommand (see `drmas --help`).
import sys
from pathlib import Path

import yaml
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/default.yaml"


# A bad config gets one clear line and a non-zero exit instead of a traceback.
try:
    from drmas.config import from_dict, load_suite, suite_path

    CFG = from_dict(config)  # drmas's own check first: its messages name the key
    validate(config, "config/schema.yaml")
    SUITES = {name: load_suite(suite_path(name)) for name in CFG.suites}
except Exception as exc:  # schema (snakemake ValidationError) or drmas ConfigError
    sys.stderr.write(f"drmas config error: {str(exc).strip().splitlines()[0]}\n")
    sys.exit(2)

RES = f"results/{CFG.profile}"
CONFIG = f"{RES}/config.yaml"
METHODS = CFG.methods
SEEDS = CFG.seeds

# The resolved config every rule reads; rewritten only when it changes, so a rerun with the
# same config finds nothing to do.
_resolved = yaml.safe_dump(dict(config), sort_keys=False)
Path(RES).mkdir(parents=True, exist_ok=True)
if not Path(CONFIG).exists() or Path(CONFIG).read_text() != _resolved:
    Path(CONFIG).write_text(_resolved)


wildcard_constraints:
    suite="|".join(SUITES),
    assignment="|".join(CFG.assignments),
    method="|".join(METHODS),
    seed=r"\d+",
    model=r"[A-Za-z0-9_-]+",


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/index.smk"
include: "rules/train.smk"
include: "rules/eval.smk"
include: "rules/report.smk"


rule all:
    input:
        expand(f"{RES}/tables/{{suite}}.{{ext}}", suite=SUITES, ext=["md", "tex", "csv"]),
        expand(f"{RES}/figures/{{suite}}_{{fig}}.png", suite=SUITES,
               fig=["grad_norm", "team_reward", "theory_check"]),
    default_target: True
