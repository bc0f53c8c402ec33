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

Difficulty knobs (benchmarks/search.yaml shows them). Left out, the generator makes exactly
the knowledge base, corpus and rows it made before they existed (tests/data/
test_knowledge_knobs.py holds the hashes of the benchmark file's dataset):
- a source's `hops` (1, 2 or 3; required): 3 is two relations, then a fact of the entity
  they lead to, "What is the river of the birthplace of the founder of Tobel Society?"; its
  rows carry `bridges` (the first two hops' answers; `bridge` is the first of them);
- the entry's `similar` (default 0): that many look-alike entities added to the knowledge
  base and corpus, each a person or an organisation whose name differs from an original's in
  one letter ("Varo Telmin" / "Vara Telmin") and whose facts are the original's but one; the
  rows of questions about an entity that has a look-alike name it in `lookalike`;
- the entry's `multi_share` (default: an even split over the sources): the share of train
  rows that come from the multi-hop sources (`hops` 2 or 3), split evenly among them, the
  rest from the single-hop ones (each source still has `test_problems` test rows);
- the entry's `revise_demos` (default 0): marks that share of the train rows `"revise": true`;
  their warm-start demonstration (drmas/mas/search/demos.py) starts with a search for a
  wrong (look-alike) name, the Verifier's "no" and the Searcher's extra search;
- the entry's `withhold_demos` (default 0): marks that share of the train rows
  `"withhold": true` (a stream of its own: no other row or mark changes); in their
  demonstration the Verifier says "no" on every turn, so under `last_turn: verify` the episode
  ends without an answer: a warm-started Verifier that often withholds the answer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from drmas.data.generators.options import checked_share, checked_source, checked_sources
from drmas.errors import ConfigError
from drmas.registry import CORPORA, GENERATORS

ONSETS = "b d f g h k l m n p r s t v z".split()
VOWELS = "a e i o u".split()
CODAS = ["", "", "", "n", "r", "l", "m"]
SOURCE_OPTIONS = ("hops",)
ENTRY_OPTIONS = ("kind", "generator", "train_problems", "test_problems", "sources", "entities",
                 "similar", "multi_share", "revise_demos", "withhold_demos")
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
    twin: str | None = None             # the look-alike's name (knob `similar`), if any


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


def _other_value(attr: str, value: str, kind: str, kb: dict[str, Entity], rng: random.Random) -> str:
    """Another value of the same type as `value` (`kind`'s attribute `attr`)."""
    vtype = ATTRS[kind][attr]
    if vtype == "year":
        return str(int(value) + rng.choice([-3, -2, -1, 1, 2, 3]))
    if vtype == "occupation":
        return rng.choice([o for o in OCCUPATIONS if o != value])
    if vtype == "river":
        return rng.choice(sorted({e.attrs["river"] for e in kb.values() if e.kind == "city"} - {value}))
    return rng.choice([n for n, e in kb.items() if e.kind == vtype and n != value])


def _lookalike_name(name: str, taken: set[str], rng: random.Random) -> str | None:
    """`name` with one vowel of its first word changed, not taken (None when none is free)."""
    first, _, rest = name.partition(" ")
    options = [first[:i] + v + first[i + 1:] for i, c in enumerate(first) if c.lower() in VOWELS
               for v in VOWELS if v != c.lower() and i > 0]
    options = [f"{o} {rest}".strip() for o in options]
    options = [o for o in options if o not in taken and o.split(" ")[0].lower() not in STOPWORDS]
    return rng.choice(options) if options else None


def add_lookalikes(kb: dict[str, Entity], n: int, seed: int) -> dict[str, Entity]:
    """`n` look-alikes appended to `kb` (knob `similar`): each copies a person or an
    organisation with one letter of its name and one of its facts changed. Drawn from their
    own random stream, after the knowledge base is built: the rest of it does not change."""
    rng = random.Random(f"lookalikes-{seed}")
    originals = [e for e in kb.values() if e.kind in ("person", "org")]
    if n > len(originals):
        raise ConfigError(f"knowledge: similar must be <= {len(originals)} (people and "
                          f"organisations) for this many entities, got {n}")
    taken = set(kb)
    for original in rng.sample(originals, n):
        name = _lookalike_name(original.name, taken, rng)
        if name is None:
            continue
        attrs = dict(original.attrs)
        changed = rng.choice(sorted(attrs))
        attrs[changed] = _other_value(changed, attrs[changed], original.kind, kb, rng)
        taken.add(name)
        original.twin = name
        kb[name] = Entity(name, original.kind, attrs, twin=original.name)
    return kb


def build_kb(n_entities: int = 300, seed: int = 0, similar: int = 0) -> dict[str, Entity]:
    """The knowledge base: entity name -> Entity, in a fixed order for a given seed; with
    `similar`, that many look-alikes at its end (`add_lookalikes`)."""
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
    kb = {e.name: e for e in countries + cities + orgs + people}
    return add_lookalikes(kb, similar, seed) if similar else kb


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
    capital of Selmar") is skipped: it needs no lookup at all. A three-hop one is skipped as
    well when a later hop comes back to an entity already on its path (it would be shorter).
    Questions about an entity that has a look-alike (knob `similar`) name it in `lookalike`.
    """
    if hops not in (1, 2, 3):
        raise ConfigError(f"knowledge: hops must be 1, 2 or 3, got {hops}")
    out = []
    for e in kb.values():
        if hops == 1:
            steps = [(e.name, [], None, e)]
        elif hops == 2:  # via a relation: "the employer of X" leads to the organisation's facts
            steps = [("the " + FACT.format(attr=rel, x=e.name), [FACT.format(attr=rel, x=e.name)],
                      e.attrs[rel], kb[e.attrs[rel]])
                     for rel, vtype in ATTRS[e.kind].items() if vtype in KIND_SHARES]
        else:            # two relations: "the founder of the employer of X"
            steps = []
            for rel, vtype in ATTRS[e.kind].items():
                if vtype not in KIND_SHARES:
                    continue
                mid = kb[e.attrs[rel]]
                for rel2, vtype2 in ATTRS[mid.kind].items():
                    if vtype2 not in KIND_SHARES or mid.attrs[rel2] in (e.name, mid.name):
                        continue
                    inner = "the " + FACT.format(attr=rel, x=e.name)
                    steps.append(("the " + FACT.format(attr=rel2, x=inner),
                                  [FACT.format(attr=rel, x=e.name), FACT.format(attr=rel2, x=mid.name)],
                                  [mid.name, mid.attrs[rel2]], kb[mid.attrs[rel2]]))
        for phrase, first, bridge, target in steps:
            for attr, vtype in ATTRS[target.kind].items():
                value = target.attrs[attr]
                if value == e.name or hops == 3 and value in bridge:
                    continue
                q = {"question": ask(attr, phrase, vtype),
                     "answers": _aliases(value, vtype), "answer_type": vtype,
                     "hops": first + [FACT.format(attr=attr, x=target.name)],
                     "bridge": bridge[0] if hops == 3 else bridge,
                     "distractors": _distractors(value, vtype, kb, rng)}
                if hops == 3:
                    q["bridges"] = bridge
                if e.twin:
                    q["lookalike"] = e.twin
                out.append(q)
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


def _train_counts(sources: dict[str, dict], train_problems: int,
                  multi_share: float | None) -> dict[str, int]:
    """Train rows per source: an even split, or `multi_share` of them over the multi-hop
    sources and the rest over the single-hop ones (each group split evenly)."""
    if multi_share is None:
        return {s: -(-train_problems // len(sources)) for s in sources}
    multi = [s for s, conf in sources.items() if (conf or {}).get("hops", 0) >= 2]
    single = [s for s in sources if s not in multi]
    if not multi or not single:
        raise ConfigError("knowledge: multi_share needs single-hop and multi-hop sources, got "
                          f"{len(single)} single-hop and {len(multi)} multi-hop")
    n_multi = round(train_problems * multi_share)
    return {s: -(-(n_multi if s in multi else train_problems - n_multi) // len(group))
            for group in (multi, single) for s in group}


def check_spec(spec: dict, where: str = "datasets") -> None:
    """The entry's and its sources' options (called when a benchmark file is loaded and
    before generating): an unknown or bad one is one ConfigError line naming its key."""
    for name, conf in checked_sources(spec, where, "knowledge", ENTRY_OPTIONS).items():
        conf = checked_source(conf, f"{where}.sources.{name}", SOURCE_OPTIONS, "hops: 1")
        if isinstance(conf.get("hops"), bool) or conf.get("hops") not in (1, 2, 3):
            raise ConfigError(f"{where}.sources.{name}.hops: must be 1, 2 or 3, got {conf.get('hops')!r}")
    similar = spec.get("similar", 0)
    if isinstance(similar, bool) or not isinstance(similar, int) or similar < 0:
        raise ConfigError(f"{where}.similar: must be an integer >= 0, got {similar!r}")
    for key in ("multi_share", "revise_demos", "withhold_demos"):
        checked_share(spec, key, where)


def generate(sources: dict[str, dict], train_problems: int, test_problems: int, seed: int,
             entities: int = 300, similar: int = 0, multi_share: float | None = None,
             revise_demos: float = 0.0, withhold_demos: float = 0.0) -> list[dict]:
    """`test_problems` test rows per source (`balanced_split`: answer types in turn), then
    train rows split evenly over the sources, then `heldout` rows: every question of the pool
    in neither split (pool order).

    Test questions never appear in train. When a source has fewer distinct questions left
    than its train share (a small KB), train questions repeat, as in a second epoch, and
    nothing is held out. The held-out rows change neither other split; they measure a model
    on many unseen questions where the test split's few leave a wide interval (with 300
    entities: 625 two-hop and 25 one-hop questions; `drmas evaluate --split heldout`).
    The knobs (`similar`, `multi_share`, `revise_demos`, `withhold_demos`, `hops: 3`): module
    docstring.
    """
    from drmas.data.generators.arithmetic import mark_demo_rows

    kb = build_kb(entities, seed, similar)
    rng = random.Random(seed + 7919)
    counts = _train_counts(sources, train_problems, multi_share)
    rows: list[dict] = []
    for source, conf in sources.items():
        per_source = counts[source]
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
    mark_demo_rows(rows, revise_demos, seed)
    mark_demo_rows(rows, withhold_demos, seed, flag="withhold")
    return rows


@GENERATORS.register("knowledge")
def _knowledge(spec: dict, seed: int) -> list[dict]:
    check_spec(spec)
    return generate(spec["sources"], int(spec["train_problems"]), int(spec["test_problems"]),
                    seed, entities=int(spec.get("entities", 300)), similar=spec.get("similar", 0),
                    multi_share=spec.get("multi_share"), revise_demos=spec.get("revise_demos", 0),
                    withhold_demos=spec.get("withhold_demos", 0))


_knowledge.check = check_spec        # run by drmas.data.prepare.check_names when a file loads


@CORPORA.register("knowledge")
def _knowledge_corpus(spec: dict, seed: int) -> list[dict]:
    return documents(build_kb(int(spec.get("entities", 300)), seed, spec.get("similar", 0)))
