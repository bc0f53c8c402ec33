"""Smoke test of the advantage benchmark at tiny size: results agree, report is complete.
Speed is not asserted (it depends on the machine); `drmas perf advantages` measures it."""

import pytest
import torch

from drmas.algos.advantages import compute_advantages
from drmas.bench.advantages import bench_advantages, main_advantages, synthetic_batch, upstream_loop_advantages
from drmas.registry import ESTIMATORS
from repo import REPO


def test_synthetic_batch_shape():
    batch = synthetic_batch(2_000, seed=1)
    assert {len(v) for v in batch.values()} == {2_000}
    assert isinstance(batch["uid"][0], str) and isinstance(batch["traj_uid"][0], int)
    assert set(batch["agent"]) == {"verifier", "searcher", "answerer"}
    assert len(set(batch["uid"])) == round(2_000 / (8 * 12.5))


@pytest.mark.parametrize("method", ESTIMATORS.names())
@pytest.mark.parametrize("norm", [True, False])
def test_upstream_loop_matches_vectorised(method, norm):
    batch = synthetic_batch(600, seed=2)
    mean_by, std_by = ESTIMATORS.get(method).mean_by, ESTIMATORS.get(method).std_by
    if mean_by is None:
        pytest.skip(f"{method} is a function of its own, not a pair of pools the loop knows")
    loop = upstream_loop_advantages(**batch, mean_by=mean_by, std_by=std_by, norm_by_std=norm, eps=1e-6)
    vec = compute_advantages(**batch, mean_by=mean_by, std_by=std_by, norm_by_std=norm)
    torch.testing.assert_close(vec, loop, atol=1e-6, rtol=1e-6)


def test_bench_and_main_report(capsys):
    result = bench_advantages(rows=3_000, loop_rows=400, repeats=1)
    assert result["rows"] == 3_000 and result["loop_rows"] == 400
    for r in result["methods"].values():
        assert r["max_abs_diff"] < 1e-6
        assert r["vectorised_rows_per_s"] > 0 and r["loop_rows_per_s"] > 0
        assert r["ratio"] == pytest.approx(r["vectorised_rows_per_s"] / r["loop_rows_per_s"])
    out = main_advantages(rows=2_000, loop_rows=300)
    assert set(out["methods"]) == {"grpo", "drmas"}
    text = capsys.readouterr().out
    assert "rows/s" in text and "grpo" in text and "drmas" in text


def test_perf_model_shapes_are_the_default_profiles():
    """`drmas perf --model small|medium` builds the default profile's shapes from constants
    (an installed package has no config/ folder): they must not drift from the profile."""
    import yaml

    from drmas.bench.models import SHAPES

    models = yaml.safe_load((REPO / "config" / "default.yaml").read_text())["models"]
    for name, shape in SHAPES.items():
        assert {k: models[name][k] for k in shape} == shape


def test_perf_model_names_pick_one_workload_each(tmp_path, monkeypatch):
    """`tiny` is the random-weight shape even where the default workflow has written its
    warm-started model (the two are different workloads, so a name must not mean either by
    what ran before); `tiny-warm` is that model, and a clear error
    naming the command that writes it when it is missing."""
    from drmas.bench import models
    from drmas.errors import ConfigError

    monkeypatch.chdir(tmp_path)
    random_small = models.CACHE / "random-small"
    random_small.mkdir(parents=True)
    (random_small / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="snakemake --cores all results/default/models/math/small"):
        models.resolve("tiny-warm")
    models.WARM.mkdir(parents=True)
    (models.WARM / "config.json").write_text("{}")
    assert models.resolve("tiny") == (random_small, "default profile's small shape, random weights")
    assert models.resolve("small")[0] == random_small
    assert models.resolve("tiny-warm")[0] == models.WARM
    with pytest.raises(ConfigError, match="tiny-warm"):
        models.resolve("no-such-model")
