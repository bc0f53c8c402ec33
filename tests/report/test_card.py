"""Result cards (drmas/report/card.py), `drmas card` and `drmas verify`, on a results folder
made of the hand-made scores and run folders of tests/runs.py (no profile runs)."""

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import make_config, math_suite
from drmas.cli.main import main
from drmas.errors import DataError
from drmas.report.card import SCHEMA, SCHEMA_VERSION, build_card, load_card, validate, write_card
from drmas.report.cardmd import render
from drmas.report.tables import write_table
from drmas.report.verify import verify
from repo import REPO
from runs import fake_run, scores_file

NUMERICS = {"fingerprint": "f98f7f2842c5319c", "kernels": "AVX2", "threads": 1, "loss": 5.73,
            "steps": 30, "torch": "2.13.0+cpu", "seconds": 2.4, "cpu": "AMD EPYC"}
SCORES = {("grpo", 0): {"a": [8, 8, 0, 4], "b": [4, 4, 4]},
          ("grpo", 1): {"a": [8, 16, 0, 2], "b": [0, 4, 0]},
          ("drmas", 0): {"a": [8, 16, 0, 6], "b": [4, 4, 4]},
          ("drmas", 1): {"a": [16, 16, 0, 4], "b": [4, 8, 0]}}


def results_folder(root: Path, scores=SCORES, profile="test") -> Path:
    """results/<profile>/ as the workflow leaves it: config.yaml, data, tokenizer, runs,
    evals, tables, benchmark files."""
    res = root / "results" / profile
    cfg = make_config(root / "model")
    res.mkdir(parents=True)
    (res / "config.yaml").write_text(yaml.safe_dump(cfg.resolved(), sort_keys=False))
    data = res / "data" / "math"
    data.mkdir(parents=True)
    (data / "train.jsonl").write_text('{"question": "1+1", "answers": ["2"]}\n')
    (data / "test.jsonl").write_text('{"question": "2+2", "answers": ["4"]}\n')
    tok = res / "models" / "math" / "tokenizer"
    tok.mkdir(parents=True)
    (tok / "tokenizer.json").write_text("{}")
    scratch = root / "scratch"
    scratch.mkdir(exist_ok=True)
    files, runs = [], []
    for (method, seed), per_problem in scores.items():
        src = Path(scores_file(scratch, "shared", method, seed, per_problem))
        dest = res / "evals" / "math" / "shared" / method / f"seed{seed}" / "scores.json"
        dest.parent.mkdir(parents=True)
        shutil.move(src, dest)
        files.append(str(dest))
        runs.append(fake_run(res / "runs" / "math", "shared", method, seed,
                             {"solver": lambda s: 1.0 + 0.1 * s, "verifier": lambda s: 0.5},
                             {"solver": 2.0, "verifier": 1.0}))
    write_table(cfg, math_suite(), files, str(res / "tables" / "math"), run_dirs=runs, n_boot=200)
    bench = res / "benchmarks" / "train"
    bench.mkdir(parents=True)
    (bench / "math_shared_grpo_seed0.tsv").write_text(
        "s\th:m:s\tmax_rss\tcpu_time\n12.5\t0:00:12\t100\t11.0\n")
    return res


@pytest.fixture
def res(tmp_path):
    return results_folder(tmp_path)


def test_card_holds_what_the_folder_holds_and_matches_its_schema(res):
    card = build_card(res, numerics=NUMERICS, machine_name="test box")
    validate(card)
    assert card["schema_version"] == SCHEMA_VERSION and card["profile"] == "test"
    assert card["machine"]["name"] == "test box" and card["machine"]["cpu"]
    assert card["numerics"]["fingerprint"] == NUMERICS["fingerprint"]
    assert "seconds" not in card["numerics"]          # a timing, not part of the fingerprint
    assert card["software"]["python"].startswith("3.")
    assert card["software"]["packages"]["torch"].startswith("2.")
    assert set(card["suites"]["math"]["data"]) == {"train.jsonl", "test.jsonl"}
    assert re.fullmatch(r"[0-9a-f]{64}", card["suites"]["math"]["tokenizer"])
    assert len(card["runs"]) == 4 and all(r["steps"] is None for r in card["runs"])
    assert {(r["method"], r["seed"]) for r in card["runs"]} == set(SCORES)
    assert all(r["train_s"] > 0 for r in card["runs"])
    assert len(card["evals"]) == 4 and card["evals"][0]["n"] == 16
    tables = card["tables"]["math"]
    assert set(tables) == {"main", "stats", "ablations", "stability"}      # no efficiency
    main = tables["main"]
    assert main["index"] == ["assignment", "method"]
    assert [r["key"] for r in main["rows"]] == [["shared", "GRPO"], ["shared", "Dr. MAS"],
                                                ["shared", "Δ Dr. MAS − GRPO"]]
    cell = main["rows"][1]["cells"]["a avg@16"]
    assert cell["lo"] <= cell["value"] <= cell["hi"] and main["rows"][1]["n"] == 2
    assert "seeds" not in main["columns"]
    stats = tables["stats"]
    assert stats["index"] == ["assignment", "method", "statistic"]
    assert [r["n"] for r in stats["rows"]] == [2, 2, 2]       # from the main table's rows
    assert card["timing"] == {"wall_s": pytest.approx(12.5, abs=1), "job_s": {"train": 12.5},
                              "jobs": {"train": 1}}


def test_schema_rejects_a_broken_card(res):
    card = build_card(res)
    assert card["numerics"] is None
    bad = json.loads(json.dumps(card))
    bad["schema_version"] = 99
    with pytest.raises(DataError, match="schema_version"):
        validate(bad)
    bad = json.loads(json.dumps(card))
    bad["tables"]["math"]["main"]["rows"][0]["cells"]["a avg@16"]["value"] = "62.3"
    with pytest.raises(DataError, match="tables/math/main/rows/0/cells"):
        validate(bad)


def test_docs_describe_every_key_of_the_schema():
    text = (REPO / "docs" / "cards.md").read_text()
    assert f"schema_version: {SCHEMA_VERSION}" in text or f"`schema_version` {SCHEMA_VERSION}" in text
    for key in SCHEMA["properties"]:
        assert f"`{key}`" in text, f"docs/cards.md does not describe the card key {key}"


def test_a_card_verifies_against_itself_and_an_identical_rerun(res, tmp_path):
    card = build_card(res, numerics=NUMERICS)
    again = build_card(results_folder(tmp_path / "again"), numerics=NUMERICS)
    for other in (card, again):
        v = verify(other, card)
        assert v.ok and set(v.counts) == {"identical"}, v.counts


def test_a_changed_seed_shows_rows_outside(res, tmp_path):
    ref = build_card(res, numerics=NUMERICS)
    changed = dict(SCORES)
    changed[("drmas", 1)] = {"a": [0, 0, 0, 0], "b": [0, 0, 0]}         # another seed's run
    card = build_card(results_folder(tmp_path / "changed", changed),
                      numerics={**NUMERICS, "fingerprint": "0000000000000000"})
    v = verify(card, ref)
    assert not v.ok and v.counts["outside"] > 0
    assert all(c["suite"] == "math" for c in v.bad())
    environment = {w: (a, b) for w, a, b in v.environment}
    assert environment["numerics fingerprint"] == ("0000000000000000", NUMERICS["fingerprint"])


def test_cli_card_then_verify_exit_status_and_files(res, tmp_path, monkeypatch, capsys):
    from drmas.bench import numerics

    real = numerics.fingerprint
    monkeypatch.setattr(numerics, "fingerprint", lambda threads=1: real(threads, steps=2))
    assert main(["card", str(res), "--machine", "ci"]) == 0
    card = load_card(res)
    assert card["numerics"]["steps"] == 2 and card["machine"]["name"] == "ci"
    ref = tmp_path / "reference" / "test.json"
    ref.parent.mkdir()
    shutil.copy(res / "card.json", ref)
    capsys.readouterr()
    # a folder holding card.json against another card: no run needed
    assert main(["verify", str(res), "--reference", str(ref)]) == 0
    out = capsys.readouterr().out
    assert "REPRODUCED" in out and "NOT" not in out and len(out.splitlines()) < 40
    # a tampered reference: a main-table value moved out of its own interval
    tampered = json.loads(ref.read_text())
    cell = tampered["tables"]["math"]["main"]["rows"][1]["cells"]["a avg@16"]
    cell["value"], cell["lo"], cell["hi"] = 99.0, 98.0, 100.0
    ref.write_text(json.dumps(tampered))
    assert main(["verify", str(res / "card.json"), "--reference", str(ref)]) == 3
    out = capsys.readouterr().out
    assert "NOT REPRODUCED" in out and "outside" in out and "Dr. MAS | a avg@16" in out
    # the workflow's way: report, write beside the card, exit 0
    verdict = res / "verify.txt"
    assert main(["verify", str(res), "--reference", str(ref), "--out", str(verdict),
                 "--report-only"]) == 0
    assert "NOT REPRODUCED" in verdict.read_text()
    assert json.loads(verdict.with_suffix(".json").read_text())["ok"] is False
    # the default reference: results/reference/<profile>.json beside the folder; none yet
    assert main(["verify", str(res)]) == 2
    assert main(["verify", str(res), "--report-only", "--out", str(verdict)]) == 0
    assert "nothing compared" in verdict.read_text()
    # a broken card is one line and exit 2
    (tmp_path / "broken.json").write_text("{}")
    assert main(["verify", str(res), "--reference", str(tmp_path / "broken.json")]) == 2


def test_render_prints_a_card_table(res, capsys):
    card = build_card(res)
    write_card(card, res / "card.json")
    text = render(card, "math")
    lines = text.splitlines()
    assert lines[0].startswith("| assignment | method | a avg@16 |") and lines[0].endswith("| seeds |")
    assert re.search(r"\| shared \| Δ Dr. MAS − GRPO \| [+-]\d+\.\d", text)
    assert main(["card", str(res / "card.json"), "--render", "math"]) == 0
    assert capsys.readouterr().out == text
    assert main(["card", str(res), "--render", "math:stats"]) == 0
    assert "P(> grpo)" in capsys.readouterr().out
    assert main(["card", str(res), "--render", "math:nope"]) == 2
