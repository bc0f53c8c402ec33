"""Warm-start demonstrations for the search MAS, from simulated episodes.

Episodes are played turn by turn with the MAS's control flow (drmas/mas/search/orchestra.py),
the real agents' prompts (`Agent.prompt`; the compact prompt set for the tiny models, the
profile's for a pretrained model's warm start) and the real retriever's documents, so the
warm-started policy sees exactly what it will see during RL. All episodes advance together
and each turn's queries go to the retriever as one batch.

The expert behind the demonstrations reads the retrieved passages: it says "no" and searches
the next title of the row's `hops` until every hop's passage has come back, then says "yes"
and answers with the gold answer. Single-hop: search the fact ("capital of Tobinon"), answer.
Multi-hop: search the first fact, then the fact of the bridge entity it names, answer. The
last turn follows the MAS's `last_turn` option (`SearchOptions`, as the orchestra): under
`answer` there is no Verifier call and the Answerer answers with what it has; under `verify`
the Verifier judges it as any turn ("yes" only when every hop's passage is in) and a "no"
ends the episode without an answer (no Searcher call).

A share `mistake_rate` of episodes carries exactly one deliberate mistake, so the policy is
sometimes wrong and RL has something to improve:
- early_answer: "yes" before the information is there, then a wrong answer (in multi-hop,
  often the bridge entity, the classic two-hop error);
- extra_search: "no" although the information is there; the query is repeated;
- wrong_query: a search looks up a wrong name, and one turn is lost;
- wrong_answer: the information is there but the answer is a distractor;
- broken_format: one output without its tag (an answer, which loses the turn, a query or a
  "yes" verdict).
Rows marked `"revise": true` (the generator's `revise_demos` share, benchmarks/search.yaml)
are played as `revise` episodes instead, when there are turns enough: the first search names
a wrong, look-alike entity (the row's `lookalike`, else the name with one vowel changed), the
Verifier says "no" while the needed passage has not come back, and the Searcher searches
again with the right name: one extra hop. Rows marked `"withhold": true` (`withhold_demos`)
are played with a Verifier that says "no" on every turn: the Searcher follows the hops and
then repeats its last search, and under `verify` the last "no" ends the episode without an
answer (under `answer` the Answerer still answers on the last turn). With no marked rows (the
default) the demonstrations are the same as without either option. Three-hop rows state each
hop's fact from their `bridges`.
A clean episode whose needed document the retriever never returns is labelled
`retrieval_miss` (under `answer` it answers with a guess on the last turn; under `verify` it
ends with a "no" and no answer).

The Searcher and the Answerer state the last fact they read before they act, as in "The
capital of Tobinon is Zami. <search> founding year of Zami </search>" and "The founding year of
Zami is 944. <answer> 944 </answer>". Writing "The capital of Tobinon is" copies words of the
question; the next word then follows the same words in a retrieved passage, the one-step
pattern match ("induction") a tiny transformer learns fastest. Answering bare, a warm-started
answerer copied the right value in 6% of held-out questions; stating the fact first, 59%
(answerer-only warm start, 300 steps, top-3 passages).

The clean demonstrations of the Searcher and the Answerer are oversampled (BOOST), so that a
warm start of a few hundred steps already succeeds often enough for RL to have a signal.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from types import SimpleNamespace

from drmas.errors import DataError, DrmasError
from drmas.mas.base import Turn
from drmas.mas.search.answerer import Answerer
from drmas.mas.search.history import SearchEpisode, record_lost_answer, record_search
from drmas.mas.search.orchestra import LAST_TURN, SearchOptions
from drmas.mas.search.prompts import PROMPT_SETS
from drmas.mas.search.searcher import Searcher
from drmas.mas.search.verifier import Verifier
from drmas.registry import DEMONSTRATIONS

Trace = tuple[str, list[dict], str]          # (agent, prompt messages, response text)

MISTAKES = ("early_answer", "extra_search", "wrong_query", "wrong_answer", "broken_format")
# Extra copies of each clean episode's queries and gold answer, per agent (see search_traces).
BOOST = {"searcher": 6, "answerer": 6}


def search_agents(prompt_set: str = "compact") -> dict:
    """The search MAS's agents by name, prompting with `prompt_set`."""
    prompts = PROMPT_SETS[prompt_set]
    return {a.name: a for a in (Verifier(prompts), Searcher(prompts), Answerer(prompts))}


@dataclass
class Demo:
    """One simulated episode: its traces and which mistake (None: none) it was given."""

    ep: SearchEpisode
    rng: random.Random
    mistake: str | None
    agents: dict                                # name -> agent (`search_agents`)
    traces: list[Trace] = field(default_factory=list)
    mistake_done: bool = False
    broken: str | None = None                   # which agent breaks its format, if any
    early_at: int = 0                           # early_answer: after this many hops found

    @property
    def row(self) -> dict:
        return self.ep.problem

    def say(self, agent: str, turn: int, text: str):
        """Prompt the real agent, record the demonstration and the turn; return its Action."""
        role = self.agents[agent]
        prompt = role.prompt(self.ep)
        action = role.parse(text)
        self.traces.append((agent, prompt, text))
        self.ep.turns.append(Turn(agent, turn, prompt, SimpleNamespace(text=text), action))
        return action

    def take(self, kind: str) -> bool:
        """True (once) when this episode's mistake is `kind`."""
        if self.mistake == kind and not self.mistake_done:
            self.mistake_done = True
            return True
        return False

    def needed(self) -> str | None:
        """The next title to look up, or None when every hop's document has been retrieved."""
        return next((t for t in self.row["hops"] if t not in self.ep.titles), None)

    def found(self) -> int:
        """How many of the row's hops have had their document retrieved."""
        return sum(t in self.ep.titles for t in self.row["hops"])

    def wrong(self) -> str:
        return self.rng.choice(self.row["distractors"])

    def last_fact(self) -> str:
        """ "The <title> is <value>. " for the last hop retrieved so far ("" before any)."""
        hops = self.row["hops"]
        known = [i for i, t in enumerate(hops) if t in self.ep.titles]
        if not known:
            return ""
        i = known[-1]
        value = (self.row["answers"][0] if i == len(hops) - 1
                 else self.row.get("bridges", [self.row["bridge"]])[i])
        return f"The {hops[i]} is {value}. "


def _verifier_text(demo: Demo, turn: int, max_turns: int) -> str:
    if demo.mistake == "withhold":           # a withholding Verifier: "no" to the end
        demo.mistake_done = True
        return "<verify>no</verify>"
    need = demo.needed()
    yes = need is None
    if turn < max_turns - 1:                 # a mistake must leave a turn to act on it
        if not yes and demo.found() == demo.early_at and demo.take("early_answer"):
            yes = True
        elif yes and demo.take("extra_search"):
            yes = False
    if yes and demo.broken == "verifier" and demo.take("broken_format"):
        return "yes"                         # missing tag: still routes to the Answerer
    return f"<verify>{'yes' if yes else 'no'}</verify>"


def lookalike_query(title: str, lookalike: str | None) -> str:
    """`title` ("birthplace of Varo Telmin") about a look-alike: `lookalike` when the title
    names the row's entity and it has one, else the name with its first vowel after the
    initial changed to the next vowel ("Vira Telmin" -> "Viro Telmin")."""
    attr, _, name = title.partition(" of ")
    if not lookalike:
        vowels = "aeiou"
        i = next((i for i, c in enumerate(name) if i and c in vowels), None)
        lookalike = name if i is None else name[:i] + vowels[(vowels.index(name[i]) + 1) % 5] + name[i + 1:]
    return f"{attr} of {lookalike}"


def _searcher_text(demo: Demo) -> str:
    need = demo.needed()
    query = need if need is not None else demo.row["hops"][-1]   # extra search: repeat
    if need is not None and demo.take("revise"):
        query = lookalike_query(need, demo.row.get("lookalike") if need == demo.row["hops"][0] else None)
    if need is not None and demo.take("wrong_query"):
        query = demo.wrong()
    if demo.broken == "searcher" and demo.take("broken_format"):
        return demo.last_fact() + query
    return f"{demo.last_fact()}<search> {query} </search>"


def _answerer_text(demo: Demo) -> str:
    gold = demo.row["answers"][0]
    if demo.needed() is not None:            # answering early: a guess
        bridge = demo.row.get("bridge")
        answer = bridge if demo.found() and demo.rng.random() < 0.5 else demo.wrong()
    elif demo.take("wrong_answer"):
        answer = demo.wrong()
    else:
        answer = gold
    fact = f"The {demo.row['hops'][-1]} is {answer}. "   # a guess, when answering early
    if demo.broken == "answerer" and demo.take("broken_format"):
        return fact
    return f"{fact}<answer> {answer} </answer>"


def simulate(rows: list[dict], seed: int, mistake_rate: float, retriever,
             max_turns: int = 4, topk: int = 3, last_turn: str = "answer",
             prompt_set: str = "compact") -> list[Demo]:
    """Play one demonstration episode per row (all rows in lockstep, one retrieval per turn);
    `last_turn` as the orchestra's (drmas/mas/search/orchestra.py, LAST_TURN); the agents
    prompt with `prompt_set`."""
    if last_turn not in LAST_TURN:
        raise ValueError(f"last_turn must be one of {', '.join(LAST_TURN)}, got {last_turn!r}")
    if retriever is None:
        raise DrmasError("search warm-start traces need a retriever: pass --index or --retriever-url")
    missing = next((r.get("id") for r in rows if not (r.get("hops") and r.get("distractors"))), False)
    if missing is not False:
        raise DataError(f"row {missing!r} has no hops/distractors: search warm-start traces need "
                        "rows of the `knowledge` generator")
    rng = random.Random(seed)
    roles = search_agents(prompt_set)
    demos = []
    for row in rows:
        mistake = rng.choice(MISTAKES) if rng.random() < mistake_rate else None
        if row.get("revise") and len(row["hops"]) + 2 <= max_turns:
            mistake = "revise"                   # a search for a look-alike first, then one more
        if row.get("withhold"):
            mistake = "withhold"                 # the Verifier never says "yes"
        demo = Demo(SearchEpisode(problem=row), random.Random(rng.random()), mistake, roles)
        if mistake == "broken_format":
            demo.broken = demo.rng.choice(("answerer", "searcher", "verifier"))
        demo.early_at = demo.rng.randrange(len(row["hops"]))
        demos.append(demo)
    active = demos
    for turn in range(max_turns):
        searching = []
        for demo in active:
            last = turn == max_turns - 1
            if last and last_turn == "answer":
                verdict = "yes"                  # no Verifier call: the Answerer answers
            else:
                verdict = demo.say("verifier", turn, _verifier_text(demo, turn, max_turns)).value
            if verdict == "yes":
                if demo.say("answerer", turn, _answerer_text(demo)).value is None:
                    record_lost_answer(demo.ep)
                else:
                    demo.ep.done = True
            elif not last:                       # a last "no" (verify): no Searcher, no answer
                searching.append((demo, demo.say("searcher", turn, _searcher_text(demo))))
        queries = [a.value for _, a in searching if a.value]
        results = iter(retriever.batch_search(queries, k=topk) if queries else [])
        for demo, action in searching:
            hits = next(results) if action.value else []
            record_search(demo.ep, action.value, hits)      # adds the hits' titles to ep.titles
        active = [d for d in active if not d.ep.done]
    for demo in demos:
        if not demo.mistake_done:            # e.g. no chance to answer early: a clean episode
            demo.mistake = None
        if demo.mistake is None and (not demo.ep.done or demo.needed() is not None):
            demo.mistake = "retrieval_miss"
    return demos


def key_traces(demo: Demo) -> list[Trace]:
    """The demonstrations a small model learns last, from a clean episode: its queries and
    its gold answer (both copied from the question and the passages). Empty for an episode
    with a mistake or a retrieval miss."""
    if demo.mistake is not None:
        return []
    return [t for t in demo.traces if t[0] in ("searcher", "answerer")]


@DEMONSTRATIONS.register("search")
def search_traces(rows: list[dict], seed: int, mistake_rate: float, retriever,
                  options: SearchOptions = SearchOptions(), boost: dict | None = None,
                  prompt_set: str = "compact") -> list[Trace]:
    """(agent, prompt messages, response) demonstrations of the Verifier, Searcher and Answerer.

    Each episode's traces are followed by extra copies of its `key_traces`, `boost[agent]`
    of each (default BOOST; `{}` for none): without them a tiny model warm-started for a few
    hundred steps writes well-formed tags but rarely copies the right words, so the MAS
    seldom succeeds and RL gets little signal. `options`: the MAS's, as the orchestra's
    (turns, documents per search, the last turn); `prompt_set`: the agents' prompts (compact
    for the tiny models).
    """
    demos = simulate(rows, seed, mistake_rate, retriever, max_turns=options.max_turns,
                     topk=options.topk, last_turn=options.last_turn, prompt_set=prompt_set)
    boost = BOOST if boost is None else boost
    return [trace for demo in demos
            for trace in demo.traces + [t for t in key_traces(demo) for _ in range(boost.get(t[0], 0))]]
