"""Seeded generator of a fictional knowledge base, its corpus and questions (default profile).

The search suite needs facts a model cannot know from pretraining, so that answering takes
retrieval: made-up people, organisations, cities and countries with attributes (birth year,
occupation, founding year, river) and relations (born in, works for, located in, founded by,
capital, leader). Names are built from a few short syllables, which a small BPE tokenizer
learns as a handful of pieces.

Each entity is one document in Search-R1's wiki-18 form `{"id", "contents": "Title\\ntext"}`
whose title is the entity's name and whose short text (at most MAX_DOC_WORDS words: tiny
models have a 512-token context and read top-k documents per search) states all its facts.

Questions come in two data_sources:
- single-hop (`hops: 1`): one lookup, "In which city was Varo Telmin born?";
- multi-hop (`hops: 2`): a relation, then an attribute of the entity it leads to,
  "In which city is the organisation that Varo Telmin works for located?".

Prepared rows carry, beside the contract fields, what the warm-start trace builder needs:
`hops` (the titles to look up, in order), `bridge` (the answer of the first hop, None for
single-hop) and `distractors` (wrong answers of the right type, for deliberate mistakes).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from drmas.data.prepare import corpus, generator
from drmas.errors import ConfigError

MAX_DOC_WORDS = 30

ONSETS = "b d f g h k l m n p r s t v z".split()
VOWELS = "a e i o u".split()
CODAS = ["", "", "", "n", "r", "l", "m"]
STOPWORDS = {"into", "then", "there", "they", "this", "that", "these", "will", "with", "such"}

OCCUPATIONS = ("potter", "weaver", "sailor", "baker", "miner", "scribe", "healer", "smith",
               "farmer", "painter", "singer", "mason", "merchant", "tailor", "hunter", "brewer")
ORG_KINDS = ("Guild", "Company", "Society", "Bank", "Academy", "Press", "Order", "Club")

# Share of each entity kind (people are the most numerous, as in an encyclopedia).
KIND_SHARES = {"person": 0.6, "org": 0.2, "city": 0.15, "country": 0.05}

# Attribute -> value type, per entity kind. Types that are entity kinds are relations.
ATTRS = {
    "person": {"birthplace": "city", "born": "year", "occupation": "occupation", "employer": "org"},
    "org": {"city": "city", "founded": "year", "founder": "person"},
    "city": {"country": "country", "founded": "year", "river": "river"},
    "country": {"capital": "city", "leader": "person"},
}

# The question asking for an attribute of X (X: a name, or a noun phrase for multi-hop).
ASK = {
    ("person", "birthplace"): "In which city was {x} born?",
    ("person", "born"): "In which year was {x} born?",
    ("person", "occupation"): "What is the occupation of {x}?",
    ("person", "employer"): "Which organisation does {x} work for?",
    ("org", "city"): "In which city is {x} located?",
    ("org", "founded"): "In which year was {x} founded?",
    ("org", "founder"): "Who founded {x}?",
    ("city", "country"): "In which country is {x}?",
    ("city", "founded"): "In which year was {x} founded?",
    ("city", "river"): "On which river does {x} lie?",
    ("country", "capital"): "What is the capital of {x}?",
    ("country", "leader"): "Who leads {x}?",
}

# The noun phrase naming the entity a relation of X leads to (the first hop of a question).
VIA = {
    ("person", "employer"): "the organisation that {x} works for",
    ("person", "birthplace"): "the city where {x} was born",
    ("org", "city"): "the city where {x} is located",
    ("org", "founder"): "the founder of {x}",
    ("city", "country"): "the country where {x} lies",
    ("country", "capital"): "the capital of {x}",
    ("country", "leader"): "the leader of {x}",
}

DOC = {
    "person": "{name} is a {occupation} born in {born} in {birthplace}. {name} works for {employer}.",
    "org": "{name} was founded in {founded} by {founder}. {name} is located in {city}.",
    "city": "{name} is a city in {country}, founded in {founded}. {name} lies on the river {river}.",
    "country": "{name} is a country. The capital of {name} is {capital} and its leader is {leader}.",
}


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
        city.attrs = {"country": country.name, "founded": str(rng.randint(900, 1600)),
                      "river": rng.choice(rivers)}
    for country in countries:
        own = [c for c in cities if c.attrs["country"] == country.name]
        country.attrs = {"capital": rng.choice(own).name, "leader": rng.choice(people).name}
    born = {p.name: rng.randint(1700, 1950) for p in people}   # orgs founded by 2000
    for org in orgs:
        founder = rng.choice(people)
        org.attrs = {"city": rng.choice(cities).name, "founder": founder.name,
                     "founded": str(born[founder.name] + rng.randint(20, 50))}
    for person in people:
        person.attrs = {"birthplace": rng.choice(cities).name, "born": str(born[person.name]),
                        "occupation": rng.choice(OCCUPATIONS), "employer": rng.choice(orgs).name}
    return {e.name: e for e in countries + cities + orgs + people}


def clip_words(text: str, limit: int = MAX_DOC_WORDS) -> str:
    """At most `limit` words (the templates stay under it; this is the guard)."""
    words = text.split()
    return text if len(words) <= limit else " ".join(words[:limit])


def documents(kb: dict[str, Entity]) -> list[dict]:
    """One wiki-18 style document per entity: {"id", "contents": "Name\\ntext"}."""
    return [{"id": str(i), "contents": f"{e.name}\n{clip_words(DOC[e.kind].format(name=e.name, **e.attrs))}"}
            for i, e in enumerate(kb.values())]


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
            steps = [(e.name, None, e)]
        else:
            steps = [(VIA[e.kind, rel].format(x=e.name), kb[e.attrs[rel]].name, kb[e.attrs[rel]])
                     for rel in ATTRS[e.kind] if (e.kind, rel) in VIA]
        for phrase, bridge, target in steps:
            for attr, vtype in ATTRS[target.kind].items():
                value = target.attrs[attr]
                if value == e.name:
                    continue
                out.append({"question": ASK[target.kind, attr].format(x=phrase),
                            "answers": _aliases(value, vtype),
                            "hops": [e.name] + ([bridge] if bridge else []), "bridge": bridge,
                            "distractors": _distractors(value, vtype, kb, rng)})
    return out


def generate(sources: dict[str, dict], train_problems: int, test_problems: int, seed: int,
             entities: int = 300) -> list[dict]:
    """`test_problems` test rows per source, then train rows split evenly over the sources.

    Test questions never appear in train. When a source has fewer distinct questions left
    than its train share (a small KB), train questions repeat, as in a second epoch.
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
        test, rest = pool[:test_problems], pool[test_problems:]
        train = [rest[i % len(rest)] for i in range(per_source)]
        for split, part in (("test", test), ("train", train)):
            rows += [{"id": f"{source}-{split}-{i}", "data_source": source, "split": split, **q}
                     for i, q in enumerate(part)]
    return rows


@generator("knowledge")
def _knowledge(spec: dict, seed: int) -> list[dict]:
    return generate(spec["sources"], int(spec["train_problems"]), int(spec["test_problems"]),
                    seed, entities=int(spec.get("entities", 300)))


@corpus("knowledge")
def _knowledge_corpus(spec: dict, seed: int) -> list[dict]:
    return documents(build_kb(int(spec.get("entities", 300)), seed))
