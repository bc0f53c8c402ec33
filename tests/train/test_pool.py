"""The resource pool: placement plans, and Ray-backed runs that equal local ones."""

import dataclasses
import json

import pytest
import torch

from conftest import make_config
from drmas.train.pool import plan_slots
from training import equal_weights, final_weights, run_trained, stripped


def test_colocated_slots_share_bundles():
    bundles, slots = plan_slots(["a", "b", "c"], world=2, cpus=4, gpus=2, placement="colocated")
    assert bundles == [{"CPU": 2.0, "GPU": 1.0}] * 2
    for r in range(2):
        ranks = [slots[g][r] for g in "abc"]
        assert {s.bundle for s in ranks} == {r}                 # rank r of every group
        assert sum(s.num_cpus for s in ranks) == pytest.approx(2.0)
        assert sum(s.num_gpus for s in ranks) == pytest.approx(1.0)
        assert all(s.threads == 2 for s in ranks)               # groups take turns


def test_disjoint_slots_are_slices():
    bundles, slots = plan_slots(["a", "b"], world=2, cpus=2, gpus=0, placement="disjoint")
    assert bundles == [{"CPU": 0.5}] * 4
    assert sorted(s.bundle for g in "ab" for s in slots[g]) == [0, 1, 2, 3]
    assert all(s.num_gpus == 0 and s.threads == 1 for g in "ab" for s in slots[g])
    with pytest.raises(ValueError, match="placement"):
        plan_slots(["a"], 1, 1, 0, "everywhere")


@pytest.mark.parametrize("resources,message", [
    ({"placement": "everywhere"}, r"resources\.placement: 'everywhere' is not one of"),
    ({"backend": "slurm"}, r"resources\.backend"),
    ({"workers_per_group": 2}, r"workers_per_group > 1 needs resources\.backend: ray"),
    ({"num_cpus": 0}, r"resources\.num_cpus"),
])
def test_resources_are_validated(resources, message):
    import yaml

    from repo import REPO as ROOT
    from drmas.config.profile import from_dict
    from drmas.errors import ConfigError

    raw = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    raw["resources"] = {**raw.get("resources", {}), "backend": "local", **resources}
    with pytest.raises(ConfigError, match=message):
        from_dict(raw)


def test_ray_run_equals_local_run(tiny_model_dir, math_rows, tmp_path):
    """Two groups as Ray actors on disjoint slices (updating side by side) give the same
    metrics and final weights as the same run in-process; Ray is shut down afterwards, the
    driver held no weights, and each group's optimiser has its agent's learning rate."""
    import ray

    train = [r for r in math_rows if r["split"] == "train"]
    local_cfg = make_config(tiny_model_dir, steps=2, save_every=1)
    ray_cfg = make_config(tiny_model_dir, steps=2, save_every=1)
    ray_cfg = dataclasses.replace(ray_cfg, resources=dataclasses.replace(
        ray_cfg.resources, backend="ray", placement="disjoint", num_cpus=2),
        agents={"verifier": {"lr": 5e-4}})
    local_cfg = dataclasses.replace(local_cfg, agents={"verifier": {"lr": 5e-4}})
    _, s_local = run_trained(local_cfg, train, tmp_path / "local")
    t, s_ray = run_trained(ray_cfg, train, tmp_path / "ray")
    assert not ray.is_initialized() and t.pool is None
    assert not any(isinstance(v, torch.nn.Module) for g in t.groups.values() for v in vars(g).values())
    assert s_ray["startup"]["ray_start_s"] > 0 and s_ray["backend"] == "ray"
    assert {g: w["lr"] for g, w in s_ray["workers"].items()} == {"solver": 1e-3, "verifier": 5e-4}
    assert s_ray["workers"] == s_local["workers"]
    assert stripped(tmp_path / "ray" / "metrics.jsonl") == stripped(tmp_path / "local" / "metrics.jsonl")
    m = json.loads((tmp_path / "ray" / "metrics.jsonl").read_text().splitlines()[-1])
    assert {"generate", "reward", "advantages", "update", "sync", "dispatch"} <= set(m["time"])
    assert set(m["memory"]) == {"solver", "verifier"} and m["memory"]["solver"]["peak_rss_mb"] > 0
    for g in ("solver", "verifier"):
        a, b = final_weights(tmp_path / "local", g), final_weights(tmp_path / "ray", g)
        assert equal_weights(a, b, same_keys=False)
