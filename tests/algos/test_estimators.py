"""The advantage estimators' registry (drmas/algos/estimators.py): one registration names an
estimator for the config's schema, `drmas config show`, the trainer and the tables."""

import pytest

from drmas.algos.estimators import Estimator, register_estimator
from drmas.config.profile import ESTIMATORS as CONFIG_ESTIMATORS, MethodDef, config_schema
from drmas.errors import ConfigError
from drmas.registry import ESTIMATORS
from drmas.report.style import METHOD_LABEL

PAPER = {"grpo": ("global", "global", "GRPO"), "drmas": ("agent", "agent", "Dr. MAS"),
         "mean_agent_std_global": ("agent", "global", "Abl. agent mean / global std"),
         "mean_global_std_agent": ("global", "agent", "Abl. global mean / agent std"),
         "grpo_2025": ("first_row", "first_row", "GRPO (upstream 2025)")}


def test_the_paper_estimators_are_registered_with_their_pools_and_labels():
    got = {n: (e.mean_by, e.std_by, e.label) for n, e in ESTIMATORS.entries().items()}
    assert got == PAPER


def test_config_schema_and_labels_come_from_the_registry():
    assert CONFIG_ESTIMATORS == tuple(ESTIMATORS.entries())
    enum = config_schema()["properties"]["method_defs"]["additionalProperties"]["properties"]["estimator"]["enum"]
    assert enum == list(ESTIMATORS.entries())
    assert {n: METHOD_LABEL[n] for n in PAPER} == {n: v[2] for n, v in PAPER.items()}


def test_a_method_named_after_an_estimator_takes_its_label(tiny_model_dir):
    from conftest import make_config

    cfg = make_config(tiny_model_dir)
    assert cfg.method("mean_global_std_agent") == MethodDef(estimator="mean_global_std_agent",
                                                            label="Abl. global mean / agent std")
    with pytest.raises(ConfigError, match="unknown method 'gpro'; estimators: grpo, drmas"):
        cfg.method("gpro")


def test_unknown_estimator_and_bad_pools_are_refused():
    with pytest.raises(ConfigError, match="unknown advantage estimator 'gpro'; known: drmas, grpo"):
        ESTIMATORS.get("gpro")
    with pytest.raises(ValueError, match="mean_by must be one of"):
        register_estimator("odd", mean_by="agents", std_by="global", label="Odd")
    assert "odd" not in ESTIMATORS


def test_registering_twice_under_one_name_is_an_error():
    with pytest.raises(ValueError, match="registered twice"):
        register_estimator("grpo", mean_by="agent", std_by="agent", label="not GRPO")
    got = ESTIMATORS.get("grpo")
    assert isinstance(got, Estimator)
    assert (got.mean_by, got.std_by, got.label, got.baseline) == ("global", "global", "GRPO", "global")


def test_an_estimator_is_a_function_of_the_rows():
    """Any function of the pools is an estimator: compute_advantages takes it directly."""
    import numpy as np

    from drmas.algos.advantages import compute_advantages

    def centred(pools, *, norm_by_std, eps):
        return pools.scores - pools.scores.mean()

    est = Estimator("centred", centred, "Centred")
    got = compute_advantages([1.0, 0.0, 0.5], ["q"] * 3, [0, 1, 2], ["a"] * 3, estimator=est)
    np.testing.assert_array_equal(got.numpy(), np.float32([0.5, -0.5, 0.0]))
    with pytest.raises(ValueError, match="not both"):
        compute_advantages([1.0], [0], [0], [0], estimator="grpo", mean_by="agent")
