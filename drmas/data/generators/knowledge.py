"""Seeded generator of a fictional knowledge base, its corpus and questions (default profile).

The search suite needs facts a model cannot know from pretraining, so that answering takes
retrieval: made-up people, organisations, cities and countries with attributes (birth year,
occupation, founding year, river) and relations (birthplace, employer, location, founder,
country, capital, leader). Names are built from a few short syllables.

The corpus has one short passage per fact, in Search-R1's wiki-18 form
`{"id", "contents": "Title\\ntext"}`: title "founder of Tobel Society", text "The founder of
Tobel Society is Fitum Dufi." (wiki-18's passages are 100-word chunks; ours are one sentence,
because the tiny models read top-k of them per search in a 512-token context). Questions and
passages name a fact with the same words, as an encyclopedia's infobox does, so a searcher can
find a fact by copying its words from the question, and an answerer by matching them.

Questions come in two data_sources:
- single-hop (`hops: 1`): one lookup, "What is the birthplace of Varo Telmin?";
- multi-hop (`hops: 2`): a relation, then a fact of the entity it leads to, "What is the
  location of the employer of Varo Telmin?" (look up "employer of Varo Telmin", read the
  organisation's name, look up "location of <organisation>").

Prepared rows carry, beside the contract fields, what the warm-start trace builder needs:
`hops` (the titles of the passages to look up, in order), `bridge` (the answer of the first
hop, None for single-hop) and `distractors` (wrong answers of the right type), and the
answer's type (`answer_type`: year, person, org, city, country, river, occupation).

Both sources' test splits take the answer types in turn (`balanced_split`), so the two
columns of a table differ in hops only. Drawn at random, they differed in what they ask:
a two-hop question ends on a fact of the organisation, city or country a relation leads to
(rivers and countries: ~15 values each), a single-hop one mostly on a person (a birth year:
~250 values). The warm-started tiny Answerer never wrote a year right (0 of 22 year
questions x 16 samples) and 9 of kb-single's first 20 test questions (the default profile
evaluates 20 per source) asked for one, against 4 of kb-multi's: two-hop scored higher
(69.4 vs 38.1 avg@16 on those 20, base model), though on the same answer types it scores
lower (50.1 vs 59.8 over 40 questions each, kb-multi reweighted to kb-single's types).
With balanced splits the base model scores kb-single 69.7 [57.2, 81.9], kb-multi 63.8
[49.7, 75.6] over 40 questions each (95% bootstrap intervals over questions; one machine,
one warm start); on the first 20, 68.4 and 70.6, a difference far inside the intervals.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from drmas.errors import ConfigError
from drmas.registry import CORPORA, GENERATORS

ONSETS = "b d f g h k l m n p r s t v z".split()
VOWELS = "a e i o u".split()
CODAS = ["", "", "", "n", "r", "l", "m"]
STOPWORDS = {"into", "then", "there", "they", "this", "that", "these", "will", "with", "such"}

OCCUPATIONS = ("potter", "weaver", "sailor", "baker", "miner", "scribe", "healer", "smith",
               "farmer", "painter", "singer", "mason", "merchant", "tailor", "hunter", "brewer")
ORG_KINDS = ("Guild", "Company", "Society", "Bank", "Academy", "Press", "Order", "Club")

# Share of each entity kind (people are the most numerous, as in an encyclopedia).
KIND_SHARES = {"person": 0.6, "org": 0.2, "city": 0.15, "country": 0.05}

# Answer types in the order a test split takes them (`balanced_split`).
ANSWER_TYPES = ("year", "person", "org", "city", "country", "river", "occupation")

# Attribute -> value type, per entity kind. Types that are entity kinds are relations.
ATTRS = {
    "person": {"birthplace": "city", "birth year": "year", "occupation": "occupation", "employer": "org"},
    "org": {"location": "city", "founding year": "year", "founder": "person"},
    "city": {"country": "country", "founding year": "year", "river": "river"},
    "country": {"capital": "city", "leader": "person"},
}

FACT = "{attr} of {x}"                 # a passage's title, and a multi-hop question's first hop
PASSAGE = "The {attr} of {x} is {value}."


def ask(attr: str, x: str, vtype: str) -> str:
    """'What is the birthplace of X?' ('Who is …' when the answer is a person)."""
    return f"{'Who' if vtype == 'person' else 'What'} is the {FACT.format(attr=attr, x=x)}?"


@dataclass
class Entity:
    name: str
    kind: str
    attrs: dict[str, str] = field(default_factory=dict)


class _Names:
    """Unique capitalised made-up words of 2-3 syllables (never reused across entities)."""

    def __init__(self, rng: random.Random):
        self.rng, self.taken = rng, set()

    def word(self, syllables: tuple[int, int] = (2, 2)) -> str:
        while True:
            n = self.rng.randint(*syllables)
            parts = [self.rng.choice(ONSETS) + self.rng.choice(VOWELS) for _ in range(n)]
            word = "".join(parts) + self.rng.choice(CODAS)
            if word not in self.taken and word not in STOPWORDS and not word.endswith("s"):
                self.taken.add(word)
                return word.capitalize()


def _counts(n: int) -> dict[str, int]:
    """Entities per kind for `n` entities in all (at least 2 of each kind)."""
    if n < 12:
        raise ConfigError(f"knowledge: entities must be >= 12, got {n}")
    counts = {k: max(2, round(n * share)) for k, share in KIND_SHARES.items() if k != "person"}
    counts["person"] = n - sum(counts.values())
    return counts


def build_kb(n_entities: int = 300, seed: int = 0) -> dict[str, Entity]:
    """The knowledge base: entity name -> Entity, in a fixed order for a given seed."""
    rng = random.Random(seed)
    names = _Names(rng)
    counts = _counts(n_entities)
    countries = [Entity(names.word((2, 3)), "country") for _ in range(counts["country"])]
    cities = [Entity(names.word((2, 3)), "city") for _ in range(counts["city"])]
    orgs = [Entity(f"{names.word()} {rng.choice(ORG_KINDS)}", "org") for _ in range(counts["org"])]
    people = [Entity(f"{names.word()} {names.word()}", "person") for _ in range(counts["person"])]
    rivers = [names.word() for _ in range(max(2, len(cities) // 3))]

    for i, city in enumerate(cities):   # round robin first: every country has a city
        country = countries[i] if i < len(countries) else rng.choice(countries)
        city.attrs = {"country": country.name, "founding year": str(rng.randint(900, 1600)),
                      "river": rng.choice(rivers)}
    for country in countries:
        own = [c for c in cities if c.attrs["country"] == country.name]
        country.attrs = {"capital": rng.choice(own).name, "leader": rng.choice(people).name}
    born = {p.name: rng.randint(1700, 1950) for p in people}   # orgs founded by 2000
    for org in orgs:
        founder = rng.choice(people)
        org.attrs = {"location": rng.choice(cities).name, "founder": founder.name,
                     "founding year": str(born[founder.name] + rng.randint(20, 50))}
    for person in people:
        person.attrs = {"birthplace": rng.choice(cities).name, "birth year": str(born[person.name]),
                        "occupation": rng.choice(OCCUPATIONS), "employer": rng.choice(orgs).name}
    return {e.name: e for e in countries + cities + orgs + people}


def documents(kb: dict[str, Entity]) -> list[dict]:
    """One wiki-18 style passage per fact: {"id", "contents": "attr of Name\\nThe attr of Name is value."}."""
    facts = [(e.name, attr, value) for e in kb.values() for attr, value in e.attrs.items()]
    return [{"id": str(i), "contents": f"{FACT.format(attr=attr, x=name)}\n"
                                       f"{PASSAGE.format(attr=attr, x=name, value=value)}"}
            for i, (name, attr, value) in enumerate(facts)]


def _aliases(value: str, vtype: str) -> list[str]:
    if vtype == "org":                  # "Orvane Guild" or just "Orvane"
        return [value, value.rsplit(" ", 1)[0]]
    if vtype == "river":
        return [value, f"{value} river", f"river {value}"]
    return [value]


def _distractors(value: str, vtype: str, kb: dict[str, Entity], rng: random.Random) -> list[str]:
    """Three wrong answers of the answer's type (for deliberate mistakes in warm-start traces)."""
    if vtype == "year":
        return [str(int(value) + d) for d in rng.sample([-40, -12, -3, -1, 1, 2, 7, 25], 3)]
    if vtype in KIND_SHARES:
        pool = [n for n, e in kb.items() if e.kind == vtype and n != value]
    elif vtype == "occupation":
        pool = [o for o in OCCUPATIONS if o != value]
    else:                               # river
        pool = sorted({e.attrs["river"] for e in kb.values() if e.kind == "city"} - {value})
    return rng.sample(pool, min(3, len(pool)))


def questions(kb: dict[str, Entity], hops: int, rng: random.Random) -> list[dict]:
    """Every question of `hops` hops the KB supports (before splitting), in KB order.

    A two-hop question whose answer is the entity it starts from (e.g. "the country of the
    capital of Selmar") is skipped: it needs no lookup at all.
    """
    if hops not in (1, 2):
        raise ConfigError(f"knowledge: hops must be 1 or 2, got {hops}")
    out = []
    for e in kb.values():
        if hops == 1:
            steps = [(e.name, [], None, e)]
        else:        # via a relation: "the employer of X" leads to the organisation's facts
            steps = [("the " + FACT.format(attr=rel, x=e.name), [FACT.format(attr=rel, x=e.name)],
                      e.attrs[rel], kb[e.attrs[rel]])
                     for rel, vtype in ATTRS[e.kind].items() if vtype in KIND_SHARES]
        for phrase, first, bridge, target in steps:
            for attr, vtype in ATTRS[target.kind].items():
                value = target.attrs[attr]
                if value == e.name:
                    continue
                out.append({"question": ask(attr, phrase, vtype),
                            "answers": _aliases(value, vtype), "answer_type": vtype,
                            "hops": first + [FACT.format(attr=attr, x=target.name)],
                            "bridge": bridge,
                            "distractors": _distractors(value, vtype, kb, rng)})
    return out


def balanced_split(pool: list[dict], n: int) -> tuple[list[dict], list[dict]]:
    """(test, rest): `n` questions taking the answer types in turn (`ANSWER_TYPES` order,
    each type's questions in pool order), so that every prefix of the test split holds the
    types about equally; the rest, in pool order."""
    queues: dict[str, list[int]] = {t: [] for t in ANSWER_TYPES}
    for i, q in enumerate(pool):
        queues[q["answer_type"]].append(i)
    picked: list[int] = []
    while len(picked) < n and any(queues.values()):
        for t in ANSWER_TYPES:
            if queues[t] and len(picked) < n:
                picked.append(queues[t].pop(0))
    chosen = set(picked)
    return [pool[i] for i in picked], [q for i, q in enumerate(pool) if i not in chosen]


def generate(sources: dict[str, dict], train_problems: int, test_problems: int, seed: int,
             entities: int = 300) -> list[dict]:
    """`test_problems` test rows per source (`balanced_split`: answer types in turn), then
    train rows split evenly over the sources, then `heldout` rows: every question of the pool
    in neither split (pool order).

    Test questions never appear in train. When a source has fewer distinct questions left
    than its train share (a small KB), train questions repeat, as in a second epoch, and
    nothing is held out. The held-out rows change neither other split; they measure a model
    on many unseen questions where the test split's few leave a wide interval (with 300
    entities: 625 two-hop and 25 one-hop questions; `drmas evaluate --split heldout`).
    """
    kb = build_kb(entities, seed)
    rng = random.Random(seed + 7919)
    per_source = -(-train_problems // len(sources))
    rows: list[dict] = []
    for source, conf in sources.items():
        pool = questions(kb, int((conf or {}).get("hops", 0)), rng)
        rng.shuffle(pool)
        if len(pool) <= test_problems:
            raise ConfigError(f"knowledge: {source} has only {len(pool)} questions for "
                              f"{test_problems} test problems; raise `entities`")
        test, rest = balanced_split(pool, test_problems)
        train = [rest[i % len(rest)] for i in range(per_source)]
        heldout = rest[per_source:]
        for split, part in (("test", test), ("train", train), ("heldout", heldout)):
            rows += [{"id": f"{source}-{split}-{i}", "data_source": source, "split": split, **q}
                     for i, q in enumerate(part)]
    return rows


@GENERATORS.register("knowledge")
def _knowledge(spec: dict, seed: int) -> list[dict]:
    return generate(spec["sources"], int(spec["train_problems"]), int(spec["test_problems"]),
                    seed, entities=int(spec.get("entities", 300)))


@CORPORA.register("knowledge")
def _knowledge_corpus(spec: dict, seed: int) -> list[dict]:
    return documents(build_kb(int(spec.get("entities", 300)), seed))
