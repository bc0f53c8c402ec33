"""The smol profile's configuration: a pretrained model converted from GGUF by the workflow
(`models.<name>.gguf`), the `smol` prompt sets and their checks. Its dry run is in
tests/workflow/test_workflow.py; the conversion itself in tests/bench/test_check_and_perf.py."""

from __future__ import annotations

import copy

import pytest
import yaml

from drmas.config.profile import from_dict, load
from drmas.errors import ConfigError
from drmas.mas.math.orchestra import MathOptions, MathOrchestra
from drmas.mas.search.orchestra import SearchOptions, SearchOrchestra
from drmas.config.suites import check_suites, load_suite, mas_options, suite_path
from drmas.retrieval.searcher import Hit
from repo import REPO as ROOT
from retrievers import FixedRetriever
from scripted import recording

SMOL = ROOT / "config" / "smol.yaml"


def smol_raw() -> dict:
    return yaml.safe_load(SMOL.read_text())


def test_smol_profile_converts_its_model_into_results():
    cfg = load(SMOL)
    assert cfg.models["smollm2"].gguf == "smollm2" and cfg.prompt_set == "smol"
    assert cfg.converted_models() == {"smollm2-135m-instruct": "smollm2"}
    suites = {name: load_suite(ROOT / suite_path(name)) for name in cfg.suites}
    check_suites(cfg, suites, ROOT / "benchmarks")
    assert cfg.for_suite("search").train.max_response_tokens == 64
    assert cfg.for_suite("math").train.max_response_tokens == 96
    assert cfg.for_suite("search").train.prompts_per_step == 3
    # a format warm start per suite, on the generated suites its demonstrations replay
    assert cfg.warm_started("smollm2") and cfg.models["smollm2"].warmstart["steps"] == 80
    assert {s: cfg.for_suite(s).warmstart.batch_size for s in cfg.suites} == {"math": 16, "search": 8}
    assert {s: cfg.dataset_key(s) for s in cfg.suites} == {"math": "basic", "search": "default"}
    # the search benchmark's last turn (verify): under `answer` RL's signal ran out (results.md)
    assert "search" not in cfg.mas_options and mas_options(cfg, suites["search"]).last_turn == "verify"


@pytest.mark.parametrize("change, fragment", [
    ({"kind": "tiny", "hidden_size": 64, "layers": 1, "heads": 1, "intermediate_size": 64},
     "models.smollm2.gguf: only a pretrained model is converted from GGUF"),
    ({"gguf": "smollm3"}, "models.smollm2.gguf: 'smollm3' is neither a .gguf file nor a packaged "
                          "model (smollm2)"),
    ({"path": "models/smollm2"}, "models.smollm2.path: a model converted from GGUF is written to "
                                 "results/smol/models/<folder>"),
    ({"path": "results/smol/models/math"}, "a folder not named after a suite"),
    ({"path": "results/default/models/smollm2"}, "results/smol/models/<folder>"),
])
def test_bad_gguf_model_is_one_line(change, fragment):
    raw = smol_raw()
    raw["models"]["smollm2"].update(change)
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        from_dict(raw)


def test_two_models_on_one_path_need_one_gguf():
    raw = smol_raw()
    raw["models"]["twin"] = copy.deepcopy(raw["models"]["smollm2"])
    assert from_dict(raw).converted_models() == {"smollm2-135m-instruct": "smollm2"}
    raw["models"]["twin"]["gguf"] = "other.gguf"
    with pytest.raises(ConfigError, match="models.smollm2.path: 'results/smol/models/smollm2-135m-instruct' is also models.twin's path, converted from another GGUF"):
        from_dict(raw)


def test_a_mas_without_the_prompt_set_is_refused_at_parse_time():
    raw = smol_raw()
    raw["suites"] = ["math4"]
    cfg = from_dict(raw)
    with pytest.raises(ConfigError, match="prompt_set: MAS 'math4' .suite 'math4'. has no prompt "
                                          "set 'smol'; known: compact, upstream"):
        check_suites(cfg, {"math4": load_suite(ROOT / suite_path("math4"))}, ROOT / "benchmarks")


# -- the smol prompt sets ---------------------------------------------------------------------


def test_smol_math_prompts_at_every_turn():
    solve = ("Solve the problem step by step. End with the line: The final answer is "
             "\\boxed{ANSWER}, where ANSWER is your result.")
    first, critique = "2 + 3 * 4 = 20. The final answer is \\boxed{20}.", "3 * 4 comes first. <verify> reject </verify>"
    act, seen = recording({"solver": [first, "\\boxed{14}"], "verifier": [critique]})
    (ep,) = MathOrchestra(MathOptions(max_loop=2), prompt_set="smol").run(
        [{"question": "Compute 2 + 3 * 4.", "answers": ["14"]}], act)
    user = lambda text: [{"role": "user", "content": text}]          # the model's own system prompt
    assert seen == [
        ("solver", user(f"Compute 2 + 3 * 4.\n\n{solve}")),
        ("verifier", user(f"Problem: Compute 2 + 3 * 4.\n\nSolution: {first}\n\nIs this solution "
                          "correct? Reply with one line: <verify>approve</verify> if it is correct, "
                          "<verify>reject</verify> if it is wrong.")),
        ("solver", user(f"Compute 2 + 3 * 4.\n\nThis solution was checked and rejected:\n{first}\n\n"
                        f"The checker said:\n3 * 4 comes first. <verify>reject</verify>\n\n{solve}")),
    ]
    assert ep.answer == "\\boxed{14}"


LIBRARY = [Hit("0", "Aaron", "Aaron was the brother of Moses.", 1.0)]       # every query's hit


def test_smol_search_prompts_name_one_line_per_role():
    act, seen = recording({"verifier": ["<verify>no</verify>", "<verify>yes</verify>"],
                           "searcher": ["<search>Aaron brother</search>"],
                           "answerer": ["<answer>Moses</answer>"]})
    (ep,) = SearchOrchestra(SearchOptions(max_turns=4, topk=1, last_turn="answer"), retriever=FixedRetriever(LIBRARY),
                            prompt_set="smol").run(
        [{"question": "Who was Aaron's brother?", "answers": ["Moses"]}], act)
    assert [agent for agent, _ in seen] == ["verifier", "searcher", "verifier", "answerer"]
    for agent, messages in seen:
        assert [m["role"] for m in messages] == ["user"]
        assert "Question: Who was Aaron's brother?" in messages[0]["content"]
        assert messages[0]["content"].rstrip().endswith({
            "verifier": "<verify>yes</verify> or <verify>no</verify>.",
            "searcher": "<search>your query</search>",
            "answerer": "<answer>your answer</answer>"}[agent])
    assert "Aaron was the brother of Moses." in seen[-1][1][0]["content"]
    assert ep.answer == "<answer>Moses</answer>"
