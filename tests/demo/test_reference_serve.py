"""The same decisions from the in-process reference engine and from `benchcheck serve --engine
reference` behind the openai client engine, at every step of the chain."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path

from demo_helpers import decisions, reference_server, screen_chain

from benchcheck.demo.run import Benchmarks
from benchcheck.engines.base import GenerateRequest
from benchcheck.engines.openai.client import OpenAIEngine
from benchcheck.engines.rules.reference import ReferenceEngine
from benchcheck.protocol import build_prompt

CHAIN = (1, 2, 3, 4, 5, 6)
BENCHES = ["DemoBoth", "DemoNeither"]  # every kind but `longest` (DemoShortcut: always flat) is in one of them


def test_served_reference_engine_decides_as_in_process(known: Benchmarks, tmp_path: Path) -> None:
    local, _ = screen_chain(known, ReferenceEngine(), CHAIN, tmp_path / "local", benches=BENCHES)
    with reference_server() as url:
        models = json.loads(urllib.request.urlopen(url + "/v1/models", timeout=10).read())
        served_id = models["data"][0]["id"]
        assert served_id == "reference:rules"  # labelled as the rule-based program it is
        served, predicted = screen_chain(known, OpenAIEngine([url], served_id, concurrency=8), CHAIN,
                                         tmp_path / "served", workers=4, batch_items=1, benches=BENCHES)
        gen = asyncio.run(OpenAIEngine([url], served_id).generate(
            [GenerateRequest("g", build_prompt("x", "The ball is red. What colour is the ball?", ["blue", "red"]))]))
    assert served == local == predicted
    assert set(local) == {"high_res", "brief", "text_leak", "ordered", "static", "options_only", "duplicate",
                          "mislabelled"}
    for step in CHAIN:
        a, b = decisions(tmp_path / "local", step), decisions(tmp_path / "served", step)
        assert a == b, f"step {step} differs"
        assert a, f"step {step} decided nothing"
    assert getattr(gen[0], "text", None) == "Answer: B"
