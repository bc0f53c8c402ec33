"""Run identity: a rerun into an existing run folder with another training configuration never
evaluates (or resumes from) the old weights."""

import json
from dataclasses import replace

from conftest import make_config, math_suite
from drmas.config.profile import workflow_config
from drmas.config.stages import changed_keys, digest, train_key
from drmas.config.suites import load_suite
from repo import REPO
from training import equal_weights, final_weights, make_trainer, stripped


def train(cfg, rows, out, capsys=None):
    return make_trainer(cfg, rows, out).run()


def test_changed_lr_then_steps_retrains_into_the_same_folder(tiny_model_dir, math_rows, tmp_path, capsys):
    rows = [r for r in math_rows if r["split"] == "train"]
    first = make_config(tiny_model_dir, steps=2, save_every=1, lr=1e-3)
    faster = make_config(tiny_model_dir, steps=2, save_every=1, lr=5e-3)
    shorter = make_config(tiny_model_dir, steps=1, save_every=1, lr=5e-3)
    run = tmp_path / "run"

    s1 = train(first, rows, run)
    w1 = final_weights(run)
    s2 = train(faster, rows, run)                 # same folder, another lr
    assert "another configuration" in capsys.readouterr().err
    assert s2["identity_hash"] != s1["identity_hash"] and s2["resumed_from"] is None
    train(faster, rows, tmp_path / "fresh_faster")
    assert not equal_weights(final_weights(run), w1)
    assert equal_weights(final_weights(run), final_weights(tmp_path / "fresh_faster"))

    s3 = train(shorter, rows, run)                # same folder, fewer steps
    out = capsys.readouterr().err
    assert "another configuration" in out and "train.solver.steps" in out
    train(shorter, rows, tmp_path / "fresh_shorter")
    assert s3["steps"] == 1 and json.loads((run / "summary.json").read_text())["steps"] == 1
    assert equal_weights(final_weights(run), final_weights(tmp_path / "fresh_shorter"))
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 1
    recorded = json.loads((run / "summary.json").read_text())["identity_hash"]
    assert recorded == digest(json.loads((run / "checkpoints" / "identity.json").read_text()))


def test_same_configuration_reuses_the_finished_run(tiny_model_dir, math_rows, tmp_path, capsys):
    rows = [r for r in math_rows if r["split"] == "train"]
    cfg = make_config(tiny_model_dir, steps=2, save_every=1)
    train(cfg, rows, tmp_path / "run")
    before = final_weights(tmp_path / "run")
    summary = train(cfg, rows, tmp_path / "run")
    assert summary["resumed_from"] == 2 and "another configuration" not in capsys.readouterr().err
    assert equal_weights(final_weights(tmp_path / "run"), before)


def test_checkpoints_of_another_configuration_are_not_resumed(tiny_model_dir, math_rows, tmp_path, capsys):
    import shutil

    rows = [r for r in math_rows if r["split"] == "train"]
    cfg = make_config(tiny_model_dir, steps=2, save_every=1)
    ckpts = tmp_path / "ckpts"
    t = make_trainer(cfg, rows, tmp_path / "a", checkpoints=ckpts)
    t.run()
    assert (ckpts / "step1" / "trainer.json").exists()
    shutil.rmtree(tmp_path / "a")                     # what Snakemake does before a rerun
    other = replace(cfg, train=replace(cfg.train, clip_high=0.28))
    t = make_trainer(other, rows, tmp_path / "a", checkpoints=ckpts)
    summary = t.run()
    assert summary["resumed_from"] is None
    assert "train.solver.clip_high" in capsys.readouterr().err


def test_resume_after_the_run_folder_was_removed_restores_metrics(tiny_model_dir, math_rows, tmp_path):
    """Snakemake removes a job's output folder before rerunning it; the checkpoints (kept
    apart) carry the metrics, so the resumed run's metrics.jsonl is whole."""
    import shutil

    rows = [r for r in math_rows if r["split"] == "train"]
    cfg = make_config(tiny_model_dir, steps=3, save_every=1)
    ckpts = tmp_path / "ckpts"
    t = make_trainer(cfg, rows, tmp_path / "ref", checkpoints=tmp_path / "c0")
    t.run()
    t = make_trainer(cfg, rows, tmp_path / "run", checkpoints=ckpts)
    t.train = replace(t.train, steps=2)             # stops after step 2 (checkpoint at 1)
    t.run()
    shutil.rmtree(tmp_path / "run")
    t = make_trainer(cfg, rows, tmp_path / "run", checkpoints=ckpts)
    assert t.run()["resumed_from"] == 1
    assert stripped(tmp_path / "run" / "metrics.jsonl") == stripped(tmp_path / "ref" / "metrics.jsonl")
    assert equal_weights(final_weights(tmp_path / "run"), final_weights(tmp_path / "ref"))


def test_train_key_names_what_changed(tiny_model_dir):
    cfg = make_config(tiny_model_dir)
    suite = math_suite()
    a = train_key(cfg, suite, "shared", "grpo", 0)
    b = train_key(replace(cfg, agents={"verifier": {"lr": 5e-4}}), suite, "nonshared", "grpo", 0)
    assert "train.verifier.lr" in changed_keys(a, b) and "train.solver.lr" not in changed_keys(a, b)
    assert digest(a) == digest(train_key(cfg, suite, "shared", "grpo", 0))
    assert digest(a) != digest(train_key(cfg, suite, "shared", "grpo", 1))


def test_worker_count_is_part_of_a_verl_runs_key_only():
    """Under `loss_aggregation: verl` rows weigh by their micro-batch on each device, so the
    worker count changes the result (drmas/algos/loss.py); under `minibatch` it does not."""
    suite = load_suite(REPO / "benchmarks" / "math.yaml")
    default = REPO / "config" / "default.yaml"

    def key(*over):
        return train_key(workflow_config([default], list(over)), suite, "shared", "grpo", 0)

    assert "workers_per_group" not in key()
    assert key() == key("resources={backend: ray, workers_per_group: 2}")
    verl = key("train={loss_aggregation: verl}")
    assert verl["workers_per_group"] == 1
    assert key("train={loss_aggregation: verl}", "resources={backend: ray, workers_per_group: 2}") != verl


def test_a_warm_started_pretrained_model_is_part_of_the_identity(tmp_path, monkeypatch):
    """The weights of a pretrained model's format warm start (`models.<name>.warmstart`) enter
    the run identity as a tiny model's do: a re-made warm start is another starting point. A
    pretrained model used as it is has no digest there."""
    import yaml

    from drmas.config.profile import from_dict
    from drmas.train.trainer import run_identity

    raw = yaml.safe_load((REPO / "config" / "smol.yaml").read_text())
    raw["models"]["smollm2"]["warmstart"] = {"steps": 10, "lr": 5.0e-5}
    monkeypatch.chdir(tmp_path)
    cfg = from_dict(raw)
    suite = load_suite(REPO / "benchmarks" / "math.yaml")
    weights = tmp_path / "results" / "smol" / "models" / "math" / "smollm2" / "model.safetensors"
    weights.parent.mkdir(parents=True)
    weights.write_bytes(b"one warm start")
    first = run_identity(cfg, suite, "shared", "grpo", 0)["base_weights"]
    weights.write_bytes(b"another warm start")
    second = run_identity(cfg, suite, "shared", "grpo", 0)["base_weights"]
    assert set(first) == {"smollm2"} and first["smollm2"] != second["smollm2"]
    raw["models"]["smollm2"].pop("warmstart")
    assert run_identity(from_dict(raw), suite, "shared", "grpo", 0)["base_weights"] == {}
