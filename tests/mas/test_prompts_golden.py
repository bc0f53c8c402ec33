"""Golden prompts: under the `upstream` prompt set every agent's prompt, at every turn, equals
the paper's template (langfengQ/DrMAS: agent_system/agent/agents/{math,search}/*,
agent_system/environments/prompts/{math,search}.py, the search environment's history and
retrieval-tool formats, multi_turn_rollout/utils.py's system prompt) filled in by hand below
(the math team context and Solver role: tests/scripted.py).
"""

from drmas.mas.math.orchestra import MathOptions, MathOrchestra
from drmas.mas.search.orchestra import SearchOptions, SearchOrchestra
from drmas.retrieval.searcher import Hit
from retrievers import FixedRetriever
from scripted import MATH_VERIFIER_ROLE, SOLVER_ROLE, SYSTEM, math_prompt, recording


# -- math -------------------------------------------------------------------------------
def test_math_upstream_prompts_at_every_turn():
    solver_1 = "3 * 4 = 12 and 2 + 12 = 15, so \\boxed{15}"
    verifier_1 = "But 2 + 12 = 14.\n<verify> reject </verify>"
    act, seen = recording({"solver": [solver_1, "2 + 12 = 14. \\boxed{14}"], "verifier": [verifier_1]})
    (ep,) = MathOrchestra(MathOptions(max_loop=2), prompt_set="upstream").run(
        [{"question": "Compute 2 + 3 * 4.", "answers": ["14"]}], act)
    team_1 = f'\nThe output of "Solver Agent": {solver_1}\n'
    team_2 = team_1 + '\nThe output of "Verifier Agent": But 2 + 12 = 14.\n<verify>reject</verify>\n'
    assert seen == [("solver", math_prompt("", SOLVER_ROLE)),
                    ("verifier", math_prompt(team_1, MATH_VERIFIER_ROLE)),
                    ("solver", math_prompt(team_2, SOLVER_ROLE))]       # it reads the critique
    assert ep.answer == "2 + 12 = 14. \\boxed{14}"


# -- search -----------------------------------------------------------------------------
SEARCH_ENV = (
    "\nYou are a member of an expert multi-agent team tasked with answering the given question "
    "step-by-step.\nThe question is: Where was Varo born?\nYour team can access an external "
    "search engine to retrieve external information. At each step, you and your teammates must "
    "collaborate to make progress toward answering the question.\n")
HISTORY_HEAD = (
    "\nPrior to this step, your team have already taken {k} step(s). Below is the interaction "
    "history where <search> </search> wrapped the past search queries and <information> "
    "</information> wrapped the corresponding retrieved information returned by the external "
    "search engine. History:\n")
STEP_1 = ('Step 1:<search>Varo birthplace</search> <information>{"result": "Doc 1: \\"Varo\\"\\n'
          'Varo was born in Korvath.\\nDoc 2: \\"Korvath\\"\\nKorvath is a river town.\\n"}'
          '</information>\n')
ROUTER_ROLE = (
    'You are a "Verifier Agent" acting as a router. Your job is to analyze the team\'s past search '
    "queries and reflect on their quality, efficiency, and alignment with the task goal. Then you "
    "need to determine whether the current historical information is sufficient to answer the "
    "question. Based on this assessment, you will decide how to route the task.\n\n"
    "Your responsibilities:\n"
    "- Review past search queries enclosed within <search> </search> and external information "
    "enclosed within <information> </information>.\n"
    "- Evaluate whether previous queries were reasonable and aligned with the task objective.\n"
    "- Identify potential issues (if any), including repeated or redundant queries; imprecise "
    "queries that are too broad, vague, or missing critical constraints/entities; misaligned "
    "queries that drift away from the actual task goal.\n"
    "- Assess whether the available information is complete and sufficient to generate a "
    "high-quality answer, and make a routing decision based on information sufficiency.\n\n"
    "You are now at step {step}. You should first reason step-by-step about the past events. "
    "After completing your reasoning, give your routing decision:\n"
    "(1) If the information is sufficient to answer the question: return <verify>yes</verify>\n"
    "(2) If the information is insufficient to answer the question: return <verify>no</verify>\n")
SEARCH_ROLE = (
    'You are a "Search Agent". Your primary responsibility is to call a search engine to gather '
    "external information that helps answer a given question. The search engine should be "
    "invoked using the format: <search>your query</search>. \n\n"
    "Before conducting the search, you should reason step-by-step about the question, any "
    "previous queries, and retrieved information, as well as your teammates' outputs (if "
    "available). This reasoning process MUST be enclosed within <think> </think> tags. Once "
    "you've finished your reasoning, provide your final search query enclosed within <search> "
    "</search>.\n")
ANSWER_ROLE = (
    'You are an "Answer Agent". Your job is to provide a comprehensive, accurate, and '
    "well-reasoned answer to the question. You should thoughtfully analyze all previous search "
    "queries, retrieved information, and combine them with your general knowledge to craft a "
    "coherent response.\n\n"
    "You should first conduct a reasoning process. This process MUST be enclosed within <think> "
    "</think> tags.\nAfter completing your reasoning, provide your final answer within <answer> "
    "</answer> tags. For example, <answer>Beijing</answer>.\n")


def env(k: int, memory: str = "") -> str:
    return SEARCH_ENV if k == 0 else SEARCH_ENV + HISTORY_HEAD.replace("{k}", str(k)) + memory + "\n"


def user(text: str) -> list[dict]:
    return [SYSTEM, {"role": "user", "content": text}]


def router(env_text: str, step: int) -> list[dict]:
    return user("\n# Task Introduction\n" + env_text + "\n\n# Your Role\n"
                + ROUTER_ROLE.replace("{step}", str(step)))


def searcher(env_text: str, step: int, verifier_output: str) -> list[dict]:
    team = f'\nThe output of "Verifier Agent": {verifier_output}\n'
    return user("\n# Task Introduction\n" + env_text + f"\n\n# Your Teammates' Outputs at Step {step}\n"
                + team + "\n\n# Your Role\n" + SEARCH_ROLE)


def answerer(env_text: str) -> list[dict]:
    return user("\n# Task Introduction\n" + env_text + "\n\n# Your Role\n" + ANSWER_ROLE)


# one search, for "Varo birthplace": two hits
ONE_SHELF = [Hit("d1", '"Varo"', "Varo was born in Korvath.", 2.0),
             Hit("d2", '"Korvath"', "Korvath is a river town.", 1.0)]


def test_search_upstream_prompts_at_every_turn():
    outputs = {
        "verifier": ["<think>Nothing is known yet.</think>\n<verify> No </verify>",
                     "<verify>no</verify>", "<verify>yes</verify>"],
        "searcher": ["<think>Look up Varo.</think> <search> Varo birthplace </search>",
                     "I will search again."],                          # no tag: a lost turn
        "answerer": ["<think>It is Korvath.</think> Korvath",            # no tag: no answer
                     "<think>Korvath.</think><answer> Korvath </answer>"],
    }
    act, seen = recording(outputs)
    shelf = FixedRetriever(ONE_SHELF, expect=["Varo birthplace"])
    (ep,) = SearchOrchestra(SearchOptions(max_turns=4, topk=2, last_turn="answer"), retriever=shelf, prompt_set="upstream").run(
        [{"question": "Where was Varo born?", "answers": ["Korvath"]}], act)
    memory_2 = STEP_1 + "\nStep 2: \n"
    memory_3 = memory_2 + "\nStep 3: \n"
    assert seen == [
        ("verifier", router(env(0), 1)),
        ("searcher", searcher(env(0), 1, "<think>Nothing is known yet.</think>\n<verify>No</verify>")),
        ("verifier", router(env(1, STEP_1), 2)),
        ("searcher", searcher(env(1, STEP_1), 2, "<verify>no</verify>")),
        ("verifier", router(env(2, memory_2), 3)),
        ("answerer", answerer(env(2, memory_2))),
        ("answerer", answerer(env(3, memory_3))),        # the last turn: no Verifier call
    ]
    assert [t.action.valid for t in ep.turns] == [True, True, True, False, True, False, True]
    assert ep.answer == "<answer>Korvath</answer>" and ep.info["num_turns"] == 4


# The last turn under upstream's current orchestra (`last_turn="verify"`): the Verifier is
# called at step 4 as at every step; its "yes" goes to the Answerer, its "no" to nobody.
LAST_OUTPUTS = {
    "searcher": ["<think>Look up Varo.</think> <search> Varo birthplace </search>",
                 "I will search again.", "Once more."],                # no tag: lost turns
}
MEMORY_3 = STEP_1 + "\nStep 2: \n" + "\nStep 3: \n"
FIRST_THREE_TURNS = [
    ("verifier", router(env(0), 1)),
    ("searcher", searcher(env(0), 1, "<verify>no</verify>")),
    ("verifier", router(env(1, STEP_1), 2)),
    ("searcher", searcher(env(1, STEP_1), 2, "<verify>no</verify>")),
    ("verifier", router(env(2, STEP_1 + "\nStep 2: \n"), 3)),
    ("searcher", searcher(env(2, STEP_1 + "\nStep 2: \n"), 3, "<verify>no</verify>")),
]


def last_turn_run(final_verdict: str, answers: list[str]):
    outputs = dict(LAST_OUTPUTS, verifier=["<verify>no</verify>"] * 3 + [final_verdict],
                   answerer=answers)
    outputs["searcher"] = list(outputs["searcher"])
    act, seen = recording(outputs)
    shelf = FixedRetriever(ONE_SHELF, expect=["Varo birthplace"])
    (ep,) = SearchOrchestra(SearchOptions(max_turns=4, topk=2, last_turn="verify"), retriever=shelf, prompt_set="upstream").run(
        [{"question": "Where was Varo born?", "answers": ["Korvath"]}], act)
    return ep, seen


def test_search_upstream_prompts_on_a_verified_last_turn_yes():
    ep, seen = last_turn_run("<think>Korvath, from Doc 1.</think>\n<verify>yes</verify>",
                             ["<think>Korvath.</think><answer> Korvath </answer>"])
    assert seen == FIRST_THREE_TURNS + [
        ("verifier", router(env(3, MEMORY_3), 4)),      # the last turn: the Verifier routes it
        ("answerer", answerer(env(3, MEMORY_3))),
    ]
    assert ep.answer == "<answer>Korvath</answer>" and ep.info["forced_zero"] is False


def test_search_upstream_prompts_on_a_verified_last_turn_no():
    ep, seen = last_turn_run("<think>Still unsure.</think>\n<verify>no</verify>", [])
    assert seen == FIRST_THREE_TURNS + [("verifier", router(env(3, MEMORY_3), 4))]
    assert ep.answer == "" and ep.info == {"num_turns": 4, "searches": 3,
                                           "searched_before_answer": 0, "forced_zero": True}
