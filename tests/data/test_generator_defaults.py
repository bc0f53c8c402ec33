"""With the difficulty knobs at their defaults, the generators make exactly the datasets they
made before the knobs existed: every `kind: generated` entry of benchmarks/*.yaml, seeds 0
and 1, rows and corpus, byte for byte (the hashes were computed from the code before the
knobs were added), and the warm-start demonstrations built on them. The entries that use
knobs (math's default, search's mid and withhold) are pinned too, so that a change of the generators shows."""

import hashlib
import json

import yaml

from drmas.data.generators.arithmetic import generate
from drmas.data.prepare import prepare_corpus, prepare_rows
from drmas.mas.math.demos import math_traces
from drmas.mas.math4.demos import math4_traces
from drmas.mas.search.demos import BOOST, key_traces, simulate
from knowledge import SPEC
from repo import REPO
from retrievers import FakeRetriever

BEFORE = {   # sha256 of the rows (corpus documents) as JSON lines, in the order generated
    "math.basic.rows.seed0": "6b0bca527b957d244b7c8647866e6ceaafd307207db690b8dffceb0b9110f0ba",
    "math.basic.rows.seed1": "08aa0aeae2842ef490cdd99d1081ee04de3b548418c30fbc2aba4ec0b0449d63",
    "math4.basic.rows.seed0": "6b0bca527b957d244b7c8647866e6ceaafd307207db690b8dffceb0b9110f0ba",
    "math4.basic.rows.seed1": "08aa0aeae2842ef490cdd99d1081ee04de3b548418c30fbc2aba4ec0b0449d63",
    "search.default.rows.seed0": "90e753dab46463ff515896aeb35646c34ba0f6579dd22bc2b1bcc0a4a4a774f7",
    "search.default.corpus.seed0": "d0084d8a54efa7b0a8463e8072d934013900a503671082b0a388850acff116bd",
    "search.default.rows.seed1": "3100f883bcf133a8e124db753e4f7e1b0e32d2f074136805d50a315cf4d5dea0",
    "search.default.corpus.seed1": "4db0e76f7186722c894af923d04af4f72033f708dc53afa5dd587d0e93a04ae1",
    # the entries that use knobs (math's and math4's default, search's mid and withhold), pinned
    # when added (withhold's corpus is the default's: the same knowledge base)
    "math.default.rows.seed0": "2cb8b9be528e071541fe003111412358b6057cb34968b8a30a0ce18235ce6ee0",
    "math.default.rows.seed1": "601b2bbe7fbf43bc37655fb63ef437e8cc540273bcd631088819e9cdf74cc301",
    "math4.default.rows.seed0": "2cb8b9be528e071541fe003111412358b6057cb34968b8a30a0ce18235ce6ee0",
    "math4.default.rows.seed1": "601b2bbe7fbf43bc37655fb63ef437e8cc540273bcd631088819e9cdf74cc301",
    "search.mid.rows.seed0": "d183e1b8d84aaa62efb8af93ca7e5c59d830f55a5d472b1ea8bdfc8aa1bf4e56",
    "search.mid.corpus.seed0": "fca511aeeeedf9c90efce29afbc5e92e437dd0aa16c8574973d06bb84e6935e1",
    "search.mid.rows.seed1": "dd46533f25dbe64402ca0207cc57e486d67725265c94cc3403224c112a344008",
    "search.mid.corpus.seed1": "e67e0ab0aabaeb7853f512ec04d1581ca570247b462d9eed2e4d78c24010d01a",
    "search.withhold.rows.seed0": "b2e2c135c176ea8220be75868e33c711682ba14f880244e6e37acdd2a230f810",
    "search.withhold.corpus.seed0": "d0084d8a54efa7b0a8463e8072d934013900a503671082b0a388850acff116bd",
    "search.withhold.rows.seed1": "3883c4606d0c66a8868526f56a10df360923419fa444b972ea731226a7b667a4",
    "search.withhold.corpus.seed1": "4db0e76f7186722c894af923d04af4f72033f708dc53afa5dd587d0e93a04ae1",
    "bench.gpu_check": "c36618d5349c6463e024fe7e7a0bfd29b95b1079dae163ad4db3a6ccc990d6aa",
    "bench.models": "0394b41a86f4ab0c75ae37f48fe7d43a2240a65be425530849e370efcda074fa",
}
DEMOS_BEFORE = {   # sha256 of json.dumps(traces), of json.dumps(rows) for the test's knowledge SPEC
    "math": "cd10192137bea030daa184e6b2891766820803458653d69714f14731bbff5592",
    "math4": "d171795f02d50775b0edab53ee1348d9717bbde16bf78bd46e8b6281692537ff",
    "search.answer": "12d132836ce9d00cc029726bced379ba8e2714846ba8a76200c5bad023da45dd",
    "search.verify": "12d132836ce9d00cc029726bced379ba8e2714846ba8a76200c5bad023da45dd",
    "knowledge.SPEC.rows": "b92cfa75c2a57848aa897c72652d2156d9038fdce0f874f0ae54dc785f2e29a7",
}


def jsonl_hash(rows) -> str:
    digest = hashlib.sha256()
    for row in rows:
        digest.update((json.dumps(row, ensure_ascii=False) + "\n").encode())
    return digest.hexdigest()


def json_hash(value) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode()).hexdigest()


def test_every_generated_benchmark_dataset_is_byte_identical():
    got, entries = {}, 0
    for path in sorted((REPO / "benchmarks").glob("*.yaml")):
        for key, spec in yaml.safe_load(path.read_text())["datasets"].items():
            if spec.get("kind") != "generated":
                continue
            entries += 1
            for seed in (0, 1):
                got[f"{path.stem}.{key}.rows.seed{seed}"] = jsonl_hash(prepare_rows(spec, seed))
                corpus = prepare_corpus(spec, seed)
                if corpus is not None:
                    got[f"{path.stem}.{key}.corpus.seed{seed}"] = jsonl_hash(corpus)
    got["bench.gpu_check"] = jsonl_hash(generate({"arith-1": {"level": 1}, "arith-2": {"level": 2}},
                                                 400, 32, seed=0))
    got["bench.models"] = jsonl_hash(generate({"addsub-1": {"level": 1}, "addsub-2": {"level": 2}},
                                              64, 8, seed=0))
    assert entries == 7                      # math, math4: default and basic; search: default, mid, withhold. A new entry needs its hash here
    assert got == BEFORE


def test_warm_start_demonstrations_are_unchanged_without_marked_rows():
    math = {"kind": "generated", "generator": "arithmetic", "train_problems": 4000, "test_problems": 40,
            "sources": {"addsub-1": {"level": 1}, "addsub-2": {"level": 2}, "mul-addsub": {"level": 3}}}
    rows = [r for r in prepare_rows(math, 0) if r["split"] == "train"][:300]
    got = {"math": json_hash(math_traces(rows, seed=0, mistake_rate=0.3)),
           "math4": json_hash(math4_traces(rows, seed=0, mistake_rate=0.3))}
    krows = [r for r in prepare_rows(SPEC, 0) if r["split"] == "train"][:120]
    docs = {d["contents"].split("\n")[0]: d["contents"].split("\n", 1)[1] for d in prepare_corpus(SPEC, 0)}
    for last in ("answer", "verify"):
        demos = simulate(krows, seed=0, mistake_rate=0.3, retriever=FakeRetriever(docs), last_turn=last)
        got[f"search.{last}"] = json_hash([t for d in demos for t in d.traces + [    # search_traces'
                                           k for k in key_traces(d) for _ in range(BOOST[k[0]])]])
    got["knowledge.SPEC.rows"] = json_hash(prepare_rows(SPEC, 0))
    assert got == DEMOS_BEFORE
