"""Math MAS: tag parsing, validity, and orchestra routing with scripted agents."""

from types import SimpleNamespace

import pytest

from drmas.errors import ConfigError
from drmas.mas.base import Action, Episode, Turn
from drmas.mas.math.orchestra import MathOptions, MathOrchestra
from drmas.mas.math.prompts import PROMPT_SETS
from drmas.mas.math.solver import Solver
from drmas.mas.math.verifier import Verifier
from drmas.registry import DEMONSTRATIONS, MAS

COMPACT, UPSTREAM = PROMPT_SETS["compact"], PROMPT_SETS["upstream"]


@pytest.mark.parametrize("text,value,valid", [
    ("ok <verify>approve</verify>", "approve", True),
    ("<verify> reject </verify>", "reject", True),                 # content is stripped
    ("<verify>REJECT</verify>", "approve", True),                  # case-sensitive, as upstream
    ("looks fine", "approve", False),            # missing verdict = approve, invalid format
    ("<verify>maybe</verify>", "approve", True),                   # a tag pair is the format
    ("<verify>reject</verify> or <verify>approve</verify>", "approve", True),  # approve wins
    ("<verify>reject", "approve", False),                          # no closing tag
])
def test_verifier_parse(text, value, valid):
    action = Verifier(COMPACT).parse(text)
    assert (action.value, action.valid) == (value, valid)


def test_cjk_invalidates_only_under_the_upstream_prompt_set():
    text = "看起来对 <verify>reject</verify>"
    assert Verifier(COMPACT).parse(text) == Action("reject", True)
    assert Verifier(UPSTREAM).parse(text) == Action("reject", False)   # verdict still read


def test_solver_parse():
    assert Solver(COMPACT).parse("2 + 2 = 4. \\boxed{4}").value == "4"
    assert Solver(COMPACT).parse("2 + 2 = 4. \\boxed{3} so \\boxed{4}").value == "4"
    assert Solver(COMPACT).parse("the answer is 4").valid is False
    assert Solver(UPSTREAM).parse("<think>x</think> \\boxed{4}") == Action("4", True)


def test_compact_prompts_carry_the_history():
    ep = Episode(problem={"question": "Q?"})
    first = Solver(COMPACT).prompt(ep)
    assert first == [{"role": "user", "content": "Problem: Q?\nSolve it step by step. "
                                                 "Put the answer in \\boxed{}."}]
    ep.turns.append(Turn("solver", 0, [], SimpleNamespace(text="1 + 1 = 3. \\boxed{3}"), Action("3", True)))
    assert Verifier(COMPACT).prompt(ep)[-1]["content"] == (
        "Problem: Q?\nSolution: 1 + 1 = 3. \\boxed{3}\n"
        "Check it. Reply <verify>approve</verify> or <verify>reject</verify>.")
    assert Solver(COMPACT).prompt(ep)[-1]["content"] == (
        "Problem: Q?\nRejected answer: 1 + 1 = 3. \\boxed{3}\n"
        "Solve it again step by step. Put the answer in \\boxed{}.")


def scripted(verdicts):
    """An act() that answers the solver with its call count and the verifier from a script."""
    log = []

    def act(agent, prompts):
        log.append((agent, len(prompts)))
        if agent == "solver":
            return [SimpleNamespace(text=f"\\boxed{{{len(log)}}}") for _ in prompts]
        return [SimpleNamespace(text=verdicts.pop(0)) for _ in prompts]
    return act, log


def test_orchestra_routing_approve_reject_missing():
    problems = [{"question": f"q{i}", "answers": ["1"]} for i in range(3)]
    act, log = scripted(["<verify>approve</verify>", "<verify>reject</verify>", "no verdict"])
    episodes = MathOrchestra(MathOptions(max_loop=2)).run(problems, act)
    # one batched solver call for all, one verifier call for all, a second solver call
    # only for the rejected episode, and no verifier on the last loop
    assert log == [("solver", 3), ("verifier", 3), ("solver", 1)]
    assert [[t.agent for t in ep.turns] for ep in episodes] == [
        ["solver", "verifier"], ["solver", "verifier", "solver"], ["solver", "verifier"]]
    assert [ep.answer for ep in episodes] == ["\\boxed{1}", "\\boxed{3}", "\\boxed{1}"]
    assert episodes[2].turns[1].action.valid is False      # missing verdict: approve, invalid
    assert [ep.info["solver_calls"] for ep in episodes] == [1, 2, 1]


def test_max_loop_one_never_calls_verifier():
    act, log = scripted([])
    MathOrchestra(MathOptions(max_loop=1)).run([{"question": "q", "answers": ["1"]}], act)
    assert log == [("solver", 1)]


def test_registry_and_prompt_sets():
    assert MAS.get("math") is MathOrchestra and DEMONSTRATIONS.get("math").__name__ == "math_traces"
    assert MathOrchestra.agents == ("solver", "verifier")
    assert set(MathOrchestra.prompt_sets) == {"compact", "upstream", "smol"}
    with pytest.raises(ConfigError, match="unknown MAS 'nope'; known: math, math4, search"):
        MAS.get("nope")
    with pytest.raises(ConfigError, match="unknown prompt set 'verbose' for MAS 'math'"):
        MathOrchestra(prompt_set="verbose")
