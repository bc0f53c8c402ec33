"""A MAS owns its options (drmas/mas/base.py, `MasOptions`; ARCHITECTURE.md, "How to add a
MAS"): a MAS defined in this file, with options of its own, is registered for these tests only
and set up by a benchmark file alone. Its options reach its orchestra, its warm-start
demonstrations and the stage keys through the benchmark's `mas_options:` (and a profile's
`mas_options.<mas>` over them) with no other drmas file knowing of it; the messages of a
wrong option are one line naming the file and the key."""

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Literal

import pytest
import yaml

from drmas.config.profile import workflow_config
from drmas.config.schema import opt
from drmas.config.stages import eval_key, tokenizer_key, train_key, warmstart_key
from drmas.config.suites import check_agents_exist, load_suite, mas_options
from drmas.errors import ConfigError
from drmas.mas.base import Action, Agent, Episode, MasOptions, NoOptions, Orchestra, call
from drmas.mas.prompting import PromptSet, pick
from drmas.registry import DEMONSTRATIONS, MAS
from repo import REPO

DEFAULT = REPO / "config" / "default.yaml"


# -- a MAS of its own, as a folder drmas/mas/echo/ would hold it ------------------------------
@dataclass(frozen=True)
class EchoOptions(MasOptions):
    rounds: int = opt(1, "how many times the Echoer speaks", minimum=1)
    tone: Literal["plain", "loud"] = opt("plain", "how the Echoer is asked")


class Echoer(Agent):
    name, role = "echoer", "Echo Agent"

    def parse(self, text):
        return Action(text, True)


class EchoPrompts(PromptSet):
    name = "compact"

    def echoer(self, episode):
        return f"{episode.problem['question']} (heard {len(episode.turns)} times)"


class EchoOrchestra:
    agents = ("echoer",)
    prompt_sets = {"compact": EchoPrompts()}
    behaviour_labels, percent_stats = {}, ()
    options_class = EchoOptions

    def __init__(self, options=EchoOptions(), *, prompt_set="compact", retriever=None):
        self.options = options
        self.echoer = Echoer(pick(self.prompt_sets, prompt_set, "echo"))

    def run(self, problems, act):
        episodes = [Episode(problem=p) for p in problems]
        for r in range(self.options.rounds):
            call(act, self.echoer, episodes, turn=r)
        for ep in episodes:
            ep.answer = ep.turns[-1].gen.text
        return episodes


def echo_traces(rows, seed, mistake_rate, options=EchoOptions(), prompt_set="compact", **_):
    return [("echoer", [{"role": "user", "content": r["question"]}], options.tone)
            for r in rows for _ in range(options.rounds)]


@pytest.fixture
def echo(monkeypatch, tmp_path):
    """The echo MAS in the registries for one test (removed after it), and its benchmark file."""
    MAS.names(), DEMONSTRATIONS.names()                      # the built-ins first
    monkeypatch.setitem(MAS._entries, "echo", EchoOrchestra)
    monkeypatch.setitem(DEMONSTRATIONS._entries, "echo", echo_traces)
    return write(tmp_path / "echo.yaml", mas_options={"rounds": 3})


def write(path, **keys):
    """A benchmark file of the echo MAS (the math suite's data) with `keys` over it."""
    math = yaml.safe_load((REPO / "benchmarks" / "math.yaml").read_text())
    spec = {"name": path.stem, "mas": "echo", "agents": ["echoer"], "reward": "qa",
            "invalid_penalty": 0.1, "datasets": math["datasets"], **keys}
    path.write_text(yaml.safe_dump(spec))
    return path


def echo_act(log):
    def act(agent, prompts):
        log.append((agent, [p[-1]["content"] for p in prompts]))
        return [SimpleNamespace(text=f"echo {len(log)}") for _ in prompts]
    return act


def test_the_benchmark_files_options_reach_the_orchestra(echo):
    cfg = workflow_config([DEFAULT], ["suites=[echo]"])
    suite = load_suite(echo)
    assert suite.mas_options == {"rounds": 3}
    assert mas_options(cfg, suite) == EchoOptions(rounds=3, tone="plain")
    from drmas.rollout.mas import build_orchestra

    orchestra = build_orchestra(cfg, suite)
    assert isinstance(orchestra, EchoOrchestra) and orchestra.options.rounds == 3
    log = []
    (ep,) = orchestra.run([{"question": "hello?"}], echo_act(log))
    assert [turn.turn for turn in ep.turns] == [0, 1, 2] and ep.answer == "echo 3"
    assert log[-1] == ("echoer", ["hello? (heard 2 times)"])


def test_a_profile_overrides_them_and_the_stage_keys_follow(echo):
    suite = load_suite(echo)
    three = workflow_config([DEFAULT], ["suites=[echo]"])
    two = workflow_config([DEFAULT], ["suites=[echo]", "mas_options={echo: {rounds: 2}}"])
    check_agents_exist(two)
    assert mas_options(two, suite) == EchoOptions(rounds=2)
    from drmas.rollout.mas import build_orchestra

    assert build_orchestra(two, suite).options.rounds == 2

    def keys(cfg):
        return [tokenizer_key(cfg, suite), warmstart_key(cfg, suite, "small"),
                train_key(cfg, suite, "shared", "grpo", 0), eval_key(cfg, suite, "shared", "grpo", 0)]
    for before, after in zip(keys(three), keys(two)):       # every job of the suite reruns
        assert (before["mas"]["rounds"], after["mas"]["rounds"]) == (3, 2)
        assert before["mas"]["tone"] == after["mas"]["tone"] == "plain"
        assert {k: v for k, v in before.items() if k != "mas"} == \
               {k: v for k, v in after.items() if k != "mas"}
    math = load_suite(REPO / "benchmarks" / "math.yaml")     # and nothing of another MAS
    assert train_key(three, math, "shared", "grpo", 0) == train_key(two, math, "shared", "grpo", 0)


def test_the_demonstrations_get_the_same_options(echo):
    from drmas.cli.job import demonstrations

    cfg = workflow_config([DEFAULT], ["suites=[echo]", "mas_options={echo: {tone: loud}}"])
    traces = demonstrations(SimpleNamespace(), cfg, load_suite(echo), [{"question": "q"}], seed=0)
    assert [t[2] for t in traces] == ["loud"] * 3


@pytest.mark.parametrize("block, message", [
    ({"speed": 2}, r"echo.yaml: mas_options.speed: unknown option of MAS 'echo'; known: rounds, tone$"),
    ({"rounds": 0}, r"echo.yaml: mas_options.rounds: 0 is less than the minimum of 1$"),
    ({"rounds": 2.0}, r"echo.yaml: mas_options.rounds: 2.0 is not of type 'integer'$"),
    ({"tone": "soft"}, r"echo.yaml: mas_options.tone: 'soft' is not one of \['plain', 'loud'\]$"),
    ([1, 2], r"echo.yaml: mas_options: \[1, 2\] is not of type 'object'$"),     # the suite schema's
])
def test_a_wrong_option_in_a_benchmark_file_is_one_line(echo, block, message):
    with pytest.raises(ConfigError, match=message):
        load_suite(write(echo, mas_options=block))


def test_numbers_given_as_strings_are_read(echo):
    assert mas_options(None, load_suite(write(echo, mas_options={"rounds": "4"}))).rounds == 4


@pytest.mark.parametrize("override, message", [
    ("mas_options={nope: {rounds: 2}}", r"^config: mas_options.nope: unknown MAS 'nope'; known: "),
    ("mas_options={echo: {speed: 2}}", r"^config: mas_options.echo.speed: unknown option of MAS 'echo'; "
                                       r"known: rounds, tone$"),
    ("mas_options={search: {last_turn: search}}",
     r"^config: mas_options.search.last_turn: 'search' is not one of \['answer', 'verify'\]$"),
])
def test_a_wrong_option_in_a_profile_is_one_line(echo, override, message):
    with pytest.raises(ConfigError, match=message):
        check_agents_exist(workflow_config([DEFAULT], [override]))


def test_the_command_line_exits_2_naming_the_file_and_the_key(echo, tmp_path, capsys):
    from drmas.cli.main import main

    bad = write(echo, mas_options={"rounds": 3, "speed": 2})
    code = main(["prepare", "--config", str(DEFAULT), "--suite", str(bad), "--out", str(tmp_path / "d")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == (f"drmas prepare: error: {bad}: mas_options.speed: unknown option "
                                 "of MAS 'echo'; known: rounds, tone")


# -- the MAS that ship -------------------------------------------------------------------------
def test_every_registered_mas_is_an_orchestra_with_its_options():
    for name in MAS.names():
        cls = MAS.get(name)
        assert issubclass(cls.options_class, MasOptions), name
        options = cls.options_class()                        # every option has a default
        assert cls.options_class.parse({}, "x") == options
        assert json.loads(json.dumps(options.key())) == options.key()     # plain data for the keys
        assert bool(options.key()) == (cls.options_class is not NoOptions), name
        for attr in Orchestra.__annotations__:
            assert hasattr(cls, attr) or attr == "options", (name, attr)
        assert callable(cls.run)


def test_the_shipped_benchmarks_set_their_mas_options(tmp_path):
    search = load_suite(REPO / "benchmarks" / "search.yaml")
    assert mas_options(None, search).key() == {"max_turns": 4, "topk": 3, "search_last_turn": "verify"}
    for name in ("math", "math4"):
        suite = load_suite(REPO / "benchmarks" / f"{name}.yaml")
        assert mas_options(None, suite).key() == {"max_loop": 2}
    with pytest.raises(ConfigError, match=r"math.yaml: mas_options.max_turns: unknown option of MAS 'math'; known: max_loop$"):
        load_suite(math_with(tmp_path, max_turns=4))


def math_with(tmp_path, **options):
    """benchmarks/math.yaml with `options` added to its `mas_options`."""
    raw = yaml.safe_load((REPO / "benchmarks" / "math.yaml").read_text())
    raw["mas_options"] = {**raw["mas_options"], **options}
    path = tmp_path / "math.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_the_math_orchestras_share_their_loop():
    from drmas.mas.math.loop import SolveReviewLoop
    from drmas.mas.math.orchestra import MathOrchestra
    from drmas.mas.math4.orchestra import Math4Orchestra

    assert issubclass(MathOrchestra, SolveReviewLoop) and issubclass(Math4Orchestra, SolveReviewLoop)
    assert MathOrchestra.run is Math4Orchestra.run is SolveReviewLoop.run
    assert MathOrchestra.options_class is Math4Orchestra.options_class
