"""Evaluation: reproducible scores, n samples per problem, per-source aggregation."""

import dataclasses
import json

import pytest

from conftest import make_config, math_suite
from drmas.config.profile import Assignment
from drmas.errors import ConfigError
from drmas.evaluation.runner import cap_per_source, evaluate, reuse_base


def test_same_config_and_seed_give_identical_scores(tiny_model_dir, math_rows, tmp_path):
    cfg = make_config(tiny_model_dir)
    test = [r for r in math_rows if r["split"] == "test"]
    a = evaluate(cfg, math_suite(), "shared", test, tmp_path / "a", seed=0)
    evaluate(cfg, math_suite(), "shared", test, tmp_path / "b", seed=0)
    assert (tmp_path / "a" / "scores.json").read_bytes() == (tmp_path / "b" / "scores.json").read_bytes()
    assert (tmp_path / "a" / "samples.jsonl").read_bytes() == (tmp_path / "b" / "samples.jsonl").read_bytes()
    samples = [json.loads(l) for l in (tmp_path / "a" / "samples.jsonl").read_text().splitlines()]
    # 3 problems per source (max_problems_per_source) x 2 sources x n = 4 samples
    assert len(samples) == 3 * 2 * 4
    assert sorted({s["sample"] for s in samples}) == [0, 1, 2, 3]
    assert set(a["per_source"]) == {"arith-1", "arith-2"} and a["n"] == 4
    assert a["overall"]["n_problems"] == 6
    solved = [s["score"] for s in samples]
    assert a["overall"]["avg@4"] == sum(solved) / len(solved)       # equal samples per problem
    # behaviour: the MAS's episode stats, averaged over the samples
    calls = [s["solver_calls"] for s in samples]
    assert a["behaviour"]["overall"]["solver_calls"] == round(sum(calls) / len(calls), 4)
    one = [s["solver_calls"] for s in samples if s["data_source"] == "arith-1"]
    assert a["behaviour"]["per_source"]["arith-1"]["solver_calls"] == round(sum(one) / len(one), 4)


def test_base_model_folder_in_place_of_the_configs(tiny_model_dir, math_rows, tmp_path):
    """`drmas evaluate --base-model small=DIR` (`base_dirs`) samples from DIR in every group
    that names the model: the same bytes as a config whose model lives at DIR."""
    from pathlib import Path

    from drmas.evaluation.runner import group_paths

    suite = math_suite()
    test = [r for r in math_rows if r["split"] == "test"]
    elsewhere = make_config(tmp_path / "absent")
    paths = group_paths(elsewhere, suite, "nonshared", None, base_dirs={"small": str(tiny_model_dir)})
    assert len(paths) == 2 and {p for p, *_ in paths.values()} == {Path(tiny_model_dir)}
    assert {p for p, *_ in group_paths(elsewhere, suite, "nonshared", None).values()} == {
        tmp_path / "absent"}
    evaluate(make_config(tiny_model_dir), suite, "nonshared", test, tmp_path / "direct", seed=1)
    evaluate(elsewhere, suite, "nonshared", test, tmp_path / "in_place", seed=1,
             base_dirs={"small": str(tiny_model_dir)})
    for name in ("samples.jsonl", "scores.json"):
        assert (tmp_path / "direct" / name).read_bytes() == (tmp_path / "in_place" / name).read_bytes()


def test_cap_per_source_keeps_order():
    rows = [{"data_source": s, "id": i} for i, s in enumerate("aabbbab")]
    assert [r["id"] for r in cap_per_source(rows, 2)] == [0, 1, 2, 3]
    assert cap_per_source(rows, None) == rows


def test_base_twin_shares_a_base_evaluation(tiny_model_dir, math_rows, tmp_path):
    cfg = make_config(tiny_model_dir)
    suite = math_suite()
    test = [r for r in math_rows if r["split"] == "test"]
    assert cfg.base_twin("shared", suite.agents) is None
    assert cfg.base_twin("nonshared", suite.agents) == "shared"
    # the claim behind the twin: grouping does not change a base policy (same samples even)
    meta = {"suite": "math", "assignment": "nonshared", "seed": 0, "method": "base"}
    shared = evaluate(cfg, suite, "shared", test, tmp_path / "shared", seed=0,
                      meta={**meta, "assignment": "shared"})
    own = evaluate(cfg, suite, "nonshared", test, tmp_path / "own", seed=0, meta=meta)
    copied = reuse_base(cfg, suite, tmp_path / "shared", tmp_path / "copy", meta)
    assert copied["overall"] == own["overall"] == shared["overall"]
    assert copied["meta"] == {**meta, "same_as": "shared"}
    assert (tmp_path / "copy" / "samples.jsonl").read_bytes() == (tmp_path / "own" / "samples.jsonl").read_bytes()
    # an assignment whose solver plays another model has no twin, and copying is refused
    other = dataclasses.replace(cfg, assignment_defs={
        **cfg.assignment_defs, "nonshared": Assignment(False, {"default": "small", "solver": "big"})})
    assert other.base_twin("nonshared", suite.agents) is None
    with pytest.raises(ConfigError, match="not a base evaluation of an assignment with the same"):
        reuse_base(other, suite, tmp_path / "shared", tmp_path / "bad", meta)


def test_evaluation_samples_as_the_trainers_worker(tiny_model_dir, math_rows, tmp_path, monkeypatch):
    """Evaluation's sampling-only groups (`rollout/sampler.py`, no training imported) load,
    encode and sample as the trainer's one-worker group (`LocalGroup`, not trainable) does:
    the same samples, byte for byte."""
    from drmas.evaluation import runner
    from drmas.train.workers import LocalGroup

    cfg, suite = make_config(tiny_model_dir), math_suite()
    test = [r for r in math_rows if r["split"] == "test"]
    evaluate(cfg, suite, "nonshared", test, tmp_path / "sampler", seed=3)
    settings = {g: s for g, (_, _, s, *_) in runner.group_paths(cfg, suite, "nonshared", None).items()}
    assert len(settings) == 2
    built = []

    def worker(g, p, agents, **kw):
        built.append(g)
        return LocalGroup(g, p, agents, settings[g], trainable=False, **kw)

    monkeypatch.setattr(runner, "SamplingGroup", worker)
    evaluate(cfg, suite, "nonshared", test, tmp_path / "worker", seed=3)
    assert sorted(built) == sorted(settings)
    for name in ("samples.jsonl", "scores.json"):
        assert (tmp_path / "sampler" / name).read_bytes() == (tmp_path / "worker" / name).read_bytes()
