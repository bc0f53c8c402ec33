"""Math MAS: tag parsing, validity, and orchestra routing with scripted agents."""

from types import SimpleNamespace

import pytest

from drmas.agents.base import last_tag
from drmas.agents.math import MathOrchestra, Solver, Verifier
from drmas.agents.registry import get_agent, get_orchestra
from drmas.errors import ConfigError


def test_last_tag_takes_last_and_strips():
    assert last_tag("<verify> reject</verify> then <verify>approve </verify>", "verify") == "approve"
    assert last_tag("no tag here", "verify") is None


@pytest.mark.parametrize("text,value,valid", [
    ("ok <verify>approve</verify>", "approve", True),
    ("<verify>REJECT</verify>", "reject", True),
    ("looks fine", "approve", False),            # missing verdict = approve, invalid format
    ("<verify>maybe</verify>", "approve", False),
])
def test_verifier_parse(text, value, valid):
    action = Verifier().parse(text)
    assert (action.value, action.valid) == (value, valid)


def test_solver_parse():
    assert Solver().parse("2 + 2 = 4. \\boxed{4}").value == "4"
    assert Solver().parse("2 + 2 = 4. \\boxed{3} so \\boxed{4}").value == "4"
    assert Solver().parse("the answer is 4").valid is False


def test_prompts_carry_the_history():
    from drmas.agents.base import Action, Episode, Turn

    ep = Episode(problem={"question": "Q?"})
    first = Solver().prompt(ep)[-1]["content"]
    assert "Q?" in first and "Rejected" not in first
    ep.turns.append(Turn("solver", 0, [], SimpleNamespace(text="1 + 1 = 3. \\boxed{3}"), Action("3", True)))
    assert "1 + 1 = 3. \\boxed{3}" in Verifier().prompt(ep)[-1]["content"]
    assert "Rejected answer: 1 + 1 = 3. \\boxed{3}" in Solver().prompt(ep)[-1]["content"]


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
    episodes = MathOrchestra(max_loop=2).run(problems, act)
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
    MathOrchestra(max_loop=1).run([{"question": "q", "answers": ["1"]}], act)
    assert log == [("solver", 1)]


def test_registry_unknown_names():
    assert get_agent("solver") is Solver
    assert get_orchestra("math") is MathOrchestra
    with pytest.raises(ConfigError, match="unknown agent 'critic'.*solver"):
        get_agent("critic")
    with pytest.raises(ConfigError, match="unknown MAS"):
        get_orchestra("nope")
