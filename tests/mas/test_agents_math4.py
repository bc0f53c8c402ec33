"""Four-agent math MAS: parsing, routing with scripted agents on every path through the loop,
golden upstream prompts (langfengQ/DrMAS agent_system/agent/agents/math/{critic,refiner}_agent.py,
the Solver and Verifier templates of the two-agent MAS, the math orchestra's team context),
demonstrations, and the benchmark file."""

from collections import Counter
from types import SimpleNamespace

import pytest
import yaml

from drmas.config.suites import load_suite
from drmas.errors import ConfigError
from drmas.mas.base import Action
from drmas.mas.math4.critic import Critic
from drmas.mas.math4.orchestra import MathOptions, Math4Orchestra
from drmas.mas.math4.prompts import PROMPT_SETS
from drmas.mas.math4.refiner import Refiner
from drmas.registry import DEMONSTRATIONS, MAS
from repo import REPO
from scripted import MATH_VERIFIER_ROLE, SOLVER_ROLE, math_prompt, recording

COMPACT, UPSTREAM = PROMPT_SETS["compact"], PROMPT_SETS["upstream"]


@pytest.mark.parametrize("text,value,valid", [
    ("step 2 is wrong <critique> 2 + 3 is 5 </critique>", "2 + 3 is 5", True),
    ("no tag here", None, False),
    ("<critique>unclosed", None, False),
    ("<critique>a</critique> <critique>b</critique>", "a", True),      # the first tag pair
])
def test_critic_parse(text, value, valid):
    assert Critic(COMPACT).parse(text) == Action(value, valid)


def test_cjk_invalidates_the_critic_only_under_the_upstream_prompt_set():
    text = "看 <critique>fine</critique>"
    assert Critic(COMPACT).parse(text) == Action("fine", True)
    assert Critic(UPSTREAM).parse(text) == Action("fine", False)


def test_refiner_parse():
    assert Refiner(COMPACT).parse("fixed: 2 + 3 = 5. \\boxed{5}") == Action("5", True)
    assert Refiner(COMPACT).parse("the answer is 5") == Action(None, False)
    assert Refiner(UPSTREAM).parse("看 \\boxed{5}") == Action("5", True)    # no CJK rule upstream


def scripted(verdicts, critic="<critique>check step 1</critique>"):
    """An act() whose Solver and Refiner box their call number, Critic says `critic`, and
    Verifier replies from `verdicts` (one per episode per call, in order); logs the calls."""
    log = []

    def act(agent, prompts):
        log.append((agent, len(prompts)))
        if agent in ("solver", "refiner"):
            return [SimpleNamespace(text=f"{agent} \\boxed{{{len(log)}}}") for _ in prompts]
        if agent == "critic":
            return [SimpleNamespace(text=critic) for _ in prompts]
        return [SimpleNamespace(text=verdicts.pop(0)) for _ in prompts]
    return act, log


def test_routing_approve_at_once_reject_then_loop_and_missing_verdict():
    problems = [{"question": f"q{i}", "answers": ["1"]} for i in range(3)]
    act, log = scripted(["<verify>approve</verify>", "<verify>reject</verify>", "no verdict"])
    episodes = Math4Orchestra(MathOptions(max_loop=2)).run(problems, act)
    # every role once for all three; then only the rejected episode goes round again, and on
    # the last loop the Solver alone answers
    assert log == [("solver", 3), ("critic", 3), ("refiner", 3), ("verifier", 3), ("solver", 1)]
    assert [[t.agent for t in ep.turns] for ep in episodes] == [
        ["solver", "critic", "refiner", "verifier"],
        ["solver", "critic", "refiner", "verifier", "solver"],
        ["solver", "critic", "refiner", "verifier"]]
    # approved: the Refiner's answer is the team's; rejected: the last loop's Solver's
    assert [ep.answer for ep in episodes] == ["refiner \\boxed{3}", "solver \\boxed{5}",
                                              "refiner \\boxed{3}"]
    assert episodes[2].turns[3].action == Action("approve", False)      # missing = approve
    assert [ep.info["solver_calls"] for ep in episodes] == [1, 2, 1]
    assert [ep.info["approved"] for ep in episodes] == [1, 0, 1]
    assert all(ep.info["refiner_changed"] == 1 for ep in episodes)       # \boxed{1} -> \boxed{3}
    assert [t.turn for t in episodes[1].turns] == [0, 0, 0, 0, 1]


def test_max_loops_reached_and_approval_on_a_later_loop():
    problems = [{"question": f"q{i}", "answers": ["1"]} for i in range(2)]
    act, log = scripted(["<verify>reject</verify>", "<verify>reject</verify>",      # loop 0
                         "<verify>approve</verify>", "<verify>reject</verify>"])    # loop 1
    episodes = Math4Orchestra(MathOptions(max_loop=3)).run(problems, act)
    assert log == [("solver", 2), ("critic", 2), ("refiner", 2), ("verifier", 2),
                   ("solver", 2), ("critic", 2), ("refiner", 2), ("verifier", 2),
                   ("solver", 1)]
    assert [len(ep.turns) for ep in episodes] == [8, 9]
    assert episodes[0].answer == "refiner \\boxed{7}"                    # approved on loop 1
    assert episodes[1].answer == "solver \\boxed{9}"                     # max loops reached
    assert [ep.info["approved"] for ep in episodes] == [1, 0]
    assert [ep.info["solver_calls"] for ep in episodes] == [2, 3]


def test_max_loop_one_is_the_solver_alone():
    act, log = scripted([])
    (ep,) = Math4Orchestra(MathOptions(max_loop=1)).run([{"question": "q", "answers": ["1"]}], act)
    assert log == [("solver", 1)] and ep.answer == "solver \\boxed{1}"
    assert ep.info == {"solver_calls": 1, "approved": 0, "refiner_changed": 0}
    with pytest.raises(ConfigError, match="max_loop: 0 is less than the minimum of 1"):
        Math4Orchestra(MathOptions(max_loop=0))


def test_compact_prompts_show_each_role_what_it_reads():
    act, seen = recording({"solver": ["1 + 1 = 3. \\boxed{3}", "1 + 1 = 2. \\boxed{2}"],
                           "critic": ["<critique> It is 2. </critique>"],
                           "refiner": ["\\boxed{3}"], "verifier": ["<verify>reject</verify>"]})
    Math4Orchestra(MathOptions(max_loop=2)).run([{"question": "Q?", "answers": ["2"]}], act)
    users = [(agent, m[-1]["content"]) for agent, m in seen]
    assert users == [
        ("solver", "Problem: Q?\nSolve it step by step. Put the answer in \\boxed{}."),
        ("critic", "Problem: Q?\nDraft: 1 + 1 = 3. \\boxed{3}\n"
                   "Critique it. Put the critique in <critique></critique>."),
        ("refiner", "Problem: Q?\nDraft: 1 + 1 = 3. \\boxed{3}\nCritique: It is 2.\n"
                    "Write the corrected solution. Put the answer in \\boxed{}."),
        ("verifier", "Problem: Q?\nSolution: \\boxed{3}\n"
                     "Check it. Reply <verify>approve</verify> or <verify>reject</verify>."),
        ("solver", "Problem: Q?\nRejected answer: \\boxed{3}\n"
                   "Solve it again step by step. Put the answer in \\boxed{}.")]
    assert all(len(m) == 1 for _, m in seen)                 # no system message


# -- golden upstream prompts (the team context and Solver role: tests/scripted.py) ---------
CRITIC_ROLE = (
    'You are a "Critic Agent". Your job is to carefully scrutinize the most recent solution '
    'proposed by your teammates (e.g. the "Solver Agent") and produce constructive, actionable '
    "feedback. Point out any incorrect reasoning steps, missing cases, computational errors, or "
    "unjustified assumptions. If you believe the solution is already correct, say so explicitly "
    "and briefly explain why.\n\n"
    'Do NOT give a final approve/reject verdict yourself (that is the "Verifier Agent"\'s job) '
    "and do NOT attempt to solve the problem yourself; only critique. A \"Refiner Agent\" will "
    "use your feedback to produce a revised solution.\n\n"
    "You MUST put your critique within <critique> </critique> tags.\n")
REFINER_ROLE = (
    'You are a "Refiner Agent". Your job is to produce a corrected, complete solution to the '
    'math problem above by incorporating the "Critic Agent"\'s feedback into the most recent '
    'solution from the "Solver Agent". If the critique identified a genuine error, fix it; if '
    "the critique was mistaken, you may keep the original reasoning but should still double "
    "check it. Write out the full, self-contained reasoning for your revised solution (do not "
    "just describe the fix).\n\nYou should give the final answer within \\boxed{}.\n")


def test_upstream_prompts_at_every_turn():
    s1 = "3 * 4 = 12 and 2 + 12 = 15, so \\boxed{15}"
    c1 = "Step 2 adds wrongly. <critique>  2 + 12 is 14, not 15. </critique> Done."
    r1 = "3 * 4 = 12, 2 + 12 = 14. \\boxed{15}"
    v1 = "The box still says 15.\n<verify> reject </verify>"
    s2 = "2 + 12 = 14. \\boxed{14}"
    act, seen = recording({"solver": [s1, s2], "critic": [c1], "refiner": [r1], "verifier": [v1]})
    (ep,) = Math4Orchestra(MathOptions(max_loop=2), prompt_set="upstream").run(
        [{"question": "Compute 2 + 3 * 4.", "answers": ["14"]}], act)
    t1 = f'\nThe output of "Solver Agent": {s1}\n'
    t2 = t1 + ('\nThe output of "Critic Agent": Step 2 adds wrongly. '
               '<critique>2 + 12 is 14, not 15.</critique> Done.\n')      # tag content tidied
    t3 = t2 + f'\nThe output of "Refiner Agent": {r1}\n'
    t4 = t3 + '\nThe output of "Verifier Agent": The box still says 15.\n<verify>reject</verify>\n'
    assert seen == [("solver", math_prompt("", SOLVER_ROLE)), ("critic", math_prompt(t1, CRITIC_ROLE)),
                    ("refiner", math_prompt(t2, REFINER_ROLE)),
                    ("verifier", math_prompt(t3, MATH_VERIFIER_ROLE)),
                    ("solver", math_prompt(t4, SOLVER_ROLE))]
    assert ep.answer == s2


# -- registration, demonstrations, benchmark file ----------------------------------------
def test_registry_and_prompt_sets():
    assert MAS.get("math4") is Math4Orchestra
    assert Math4Orchestra.agents == ("solver", "critic", "refiner", "verifier")
    assert set(Math4Orchestra.prompt_sets) == {"compact", "upstream"}
    assert DEMONSTRATIONS.get("math4").__name__ == "math4_traces"


def test_demonstrations_cover_every_role_with_the_real_prompts(math_rows):
    train = [r for r in math_rows if r["split"] == "train"][:200]
    traces = DEMONSTRATIONS.get("math4")(train, seed=0, mistake_rate=0.3)
    counts = Counter(agent for agent, _, _ in traces)
    assert counts["critic"] == counts["refiner"] == counts["verifier"] == len(train)
    assert counts["solver"] > len(train)                         # some retries after a reject
    # each episode's demonstrations are what the orchestra shows and does with those outputs
    for i, row in enumerate(train[:60]):
        episode = DEMONSTRATIONS.get("math4")([row], seed=i, mistake_rate=0.3)
        outputs = {a: [t for b, _, t in episode if b == a] for a in counts}
        act, seen = recording(outputs)
        Math4Orchestra(MathOptions(max_loop=2)).run([row], act)
        assert seen == [(a, p) for a, p, _ in episode]
    # careful and sloppy critics and refiners both occur, and some outputs break the format
    critic = [Critic(COMPACT).parse(t) for a, _, t in traces if a == "critic"]
    assert {c.value for c in critic} >= {"Right."} and any(c.value and c.value.startswith("It is")
                                                         for c in critic)
    assert 0 < sum(not c.valid for c in critic) < 0.15 * len(critic)


def test_benchmark_file_uses_the_math_suite_data():
    suite = load_suite(REPO / "benchmarks" / "math4.yaml")
    assert suite.mas == "math4" and suite.agents == ["solver", "critic", "refiner", "verifier"]
    math = yaml.safe_load((REPO / "benchmarks" / "math.yaml").read_text())
    assert suite.datasets == math["datasets"] and suite.reward == math["reward"]
    assert suite.invalid_penalty == math["invalid_penalty"]


def test_one_training_step_trains_all_four_roles(tiny_model_dir, math_rows, tmp_path):
    """The suite trains like any other: each role its own group, rows from every role."""
    from conftest import make_config, math_suite
    from training import make_trainer

    suite = math_suite(name="math4", mas="math4", agents=["solver", "critic", "refiner", "verifier"])
    train = [r for r in math_rows if r["split"] == "train"]
    trainer = make_trainer(make_config(tiny_model_dir), train, tmp_path, "nonshared", "drmas", suite=suite)
    try:
        m = trainer.train_step()
    finally:
        trainer.close()
    assert set(trainer.groups) == {"solver", "critic", "refiner", "verifier"}
    calls = {a: m["agents"][a]["calls"] for a in suite.agents}
    assert calls["critic"] == calls["refiner"] == calls["verifier"] == 2 * 4
    assert calls["solver"] >= 8 and m["rows"] == sum(calls.values())
    assert all(m["groups"][g]["rows"] == calls[g] for g in suite.agents)
    assert set(m["episodes"]) == {"solver_calls", "approved", "refiner_changed"}
