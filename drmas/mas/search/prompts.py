"""Prompt sets of the search MAS (see drmas/mas/prompting.py).

`upstream` renders the paper's prompts: the system prompt; the environment prompt with the
question and, from the second turn on, the interaction history (`Step k:<action> <obs>`,
where the action is the Searcher's `<search>…</search>` and the observation the retrieval
tool's JSON inside `<information>…</information>`); the Searcher also reads the Verifier's
output of this turn. `compact` (the tiny default models) puts the history first, each search
as `<search> q </search>` with Search-R1's `Doc i(Title: …) …` block, then the question and a
one-line instruction.
"""

from __future__ import annotations

import json

from drmas.mas.parsing import tag_tidied
from drmas.mas.prompting import OutputFormat, PromptSet
from drmas.mas.search.history import SearchEpisode, SearchStep
from drmas.retrieval.searcher import format_docs

NO_QUERY = "No search: the query was missing."
NO_HITS = "No documents found."
NO_ANSWER = "No answer: the answer tag was missing."


class Compact(PromptSet):
    """History, then the question, then this role's instruction.

    The question comes after the history (Search-R1 puts it first) so that it sits next to
    the instruction and the reply: the searcher copies its words, and a tiny model's
    attention reaches a near span far more easily than one a few hundred tokens back (the
    first query was right in 43% of episodes with the question first and 94% after).
    Queries and answers are written with a space inside their tags (as in Search-R1's
    prompts): a name then tokenizes the same as in the question and the documents.
    """

    name = "compact"
    instructions = {
        "verifier": ("Is the information above enough to answer the question? "
                     "Reply <verify>yes</verify> or <verify>no</verify>."),
        "searcher": "Search for the missing information: state what you know, then <search> query </search>.",
        "answerer": "Answer the question: state the fact, then <answer> answer </answer>.",
    }

    @staticmethod
    def step(step: SearchStep) -> str:
        if step.agent == "answerer":
            return f"<answer>  </answer>\n<information>{NO_ANSWER}</information>"
        query = " ".join((step.query or "").split())
        info = (format_docs(step.hits).strip() or NO_HITS) if query else NO_QUERY
        return f"<search> {query} </search>\n<information>{info}</information>"

    def history(self, ep: SearchEpisode) -> str:
        if not ep.history:
            return "No searches yet."
        return "\n".join(self.step(s) for s in ep.history)

    def _render(self, agent: str, ep: SearchEpisode) -> str:
        return f"{self.history(ep)}\nQuestion: {ep.problem['question']}\n{self.instructions[agent]}"

    def verifier(self, ep: SearchEpisode) -> str:
        return self._render("verifier", ep)

    def searcher(self, ep: SearchEpisode) -> str:
        return self._render("searcher", ep)

    def answerer(self, ep: SearchEpisode) -> str:
        return self._render("answerer", ep)


UPSTREAM_SYSTEM = "You are a helpful and harmless assistant."

UPSTREAM_ENV_FIRST = """
You are a member of an expert multi-agent team tasked with answering the given question step-by-step.
The question is: {question}
Your team can access an external search engine to retrieve external information. At each step, you and your teammates must collaborate to make progress toward answering the question.
"""

UPSTREAM_ENV = """
You are a member of an expert multi-agent team tasked with answering the given question step-by-step.
The question is: {question}
Your team can access an external search engine to retrieve external information. At each step, you and your teammates must collaborate to make progress toward answering the question.

Prior to this step, your team have already taken {step_count} step(s). Below is the interaction history where <search> </search> wrapped the past search queries and <information> </information> wrapped the corresponding retrieved information returned by the external search engine. History:
{memory_context}
"""

UPSTREAM_VERIFIER = """
# Task Introduction
{env_prompt}

# Your Role
You are a "Verifier Agent" acting as a router. Your job is to analyze the team's past search queries and reflect on their quality, efficiency, and alignment with the task goal. Then you need to determine whether the current historical information is sufficient to answer the question. Based on this assessment, you will decide how to route the task.

Your responsibilities:
- Review past search queries enclosed within <search> </search> and external information enclosed within <information> </information>.
- Evaluate whether previous queries were reasonable and aligned with the task objective.
- Identify potential issues (if any), including repeated or redundant queries; imprecise queries that are too broad, vague, or missing critical constraints/entities; misaligned queries that drift away from the actual task goal.
- Assess whether the available information is complete and sufficient to generate a high-quality answer, and make a routing decision based on information sufficiency.

You are now at step {step}. You should first reason step-by-step about the past events. After completing your reasoning, give your routing decision:
(1) If the information is sufficient to answer the question: return <verify>yes</verify>
(2) If the information is insufficient to answer the question: return <verify>no</verify>
"""

UPSTREAM_SEARCHER = """
# Task Introduction
{env_prompt}

# Your Teammates' Outputs at Step {step}
{team_context}

# Your Role
You are a "Search Agent". Your primary responsibility is to call a search engine to gather external information that helps answer a given question. The search engine should be invoked using the format: <search>your query</search>. 

Before conducting the search, you should reason step-by-step about the question, any previous queries, and retrieved information, as well as your teammates' outputs (if available). This reasoning process MUST be enclosed within <think> </think> tags. Once you've finished your reasoning, provide your final search query enclosed within <search> </search>.
"""

UPSTREAM_ANSWERER = """
# Task Introduction
{env_prompt}

# Your Role
You are an "Answer Agent". Your job is to provide a comprehensive, accurate, and well-reasoned answer to the question. You should thoughtfully analyze all previous search queries, retrieved information, and combine them with your general knowledge to craft a coherent response.

You should first conduct a reasoning process. This process MUST be enclosed within <think> </think> tags.
After completing your reasoning, provide your final answer within <answer> </answer> tags. For example, <answer>Beijing</answer>.
"""


def tool_observation(step: SearchStep) -> str:
    """What the paper's search tool returns for a step: its JSON (documents as
    `Doc i: <contents>` lines) inside `<information>…</information>`; "" when nothing was
    searched."""
    if not step.searched:
        return ""
    docs = "".join(f"Doc {i}: {h.contents.strip()}\n" for i, h in enumerate(step.hits, start=1))
    return f"<information>{json.dumps({'result': docs})}</information>"


def memory_context(ep: SearchEpisode) -> str:
    """The interaction history as the paper's environment writes it, one step per turn."""
    lines = []
    for k, step in enumerate(ep.history, start=1):
        action = f"<search>{step.query}</search>" if step.searched else ""
        lines.append(f"Step {k}:{action} {tool_observation(step)}\n")
    return "\n".join(lines)


class Upstream(PromptSet):
    name, system = "upstream", UPSTREAM_SYSTEM
    formats = {"verifier": OutputFormat(no_cjk=True),
               "searcher": OutputFormat(think=True, no_cjk=True),
               "answerer": OutputFormat(think=True, no_cjk=True)}

    @staticmethod
    def env_prompt(ep: SearchEpisode) -> str:
        question = ep.problem["question"]
        if not ep.history:
            return UPSTREAM_ENV_FIRST.format(question=question)
        return UPSTREAM_ENV.format(question=question, step_count=len(ep.history),
                                   memory_context=memory_context(ep))

    @staticmethod
    def team_context(ep: SearchEpisode) -> str:
        """This turn's earlier outputs (the Verifier's, its verdict tag tidied)."""
        turn = len(ep.history)
        return "".join(f'\nThe output of "Verifier Agent": {tag_tidied(t.gen.text, "verify")}\n'
                       for t in ep.turns if t.turn == turn and t.agent == "verifier")

    def verifier(self, ep: SearchEpisode) -> str:
        return UPSTREAM_VERIFIER.format(env_prompt=self.env_prompt(ep), step=len(ep.history) + 1)

    def searcher(self, ep: SearchEpisode) -> str:
        return UPSTREAM_SEARCHER.format(env_prompt=self.env_prompt(ep), step=len(ep.history) + 1,
                                        team_context=self.team_context(ep))

    def answerer(self, ep: SearchEpisode) -> str:
        return UPSTREAM_ANSWERER.format(env_prompt=self.env_prompt(ep))


class Smol(Compact):
    """For a small pretrained chat model (SmolLM2-135M-Instruct): the compact layout
    (history, question, instruction) with each role's output format spelled out as the one
    line to write; no `<think>` pair is asked for (see docs/profiles.md, "The smol profile")."""

    name = "smol"
    instructions = {
        "verifier": ("Is the information above enough to answer the question? Reply with one "
                     "line: <verify>yes</verify> or <verify>no</verify>."),
        "searcher": ("What should we search for to answer the question? Reply with one line: "
                     "<search>your query</search>"),
        "answerer": ("Answer the question with a short name or number. Reply with one line: "
                     "<answer>your answer</answer>"),
    }


PROMPT_SETS = {"compact": Compact(), "upstream": Upstream(), "smol": Smol()}
