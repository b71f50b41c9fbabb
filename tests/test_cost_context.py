"""Cost files timed at two contexts (``long_context``, :mod:`evolve.eval.costs`): every call priced at the context of
the texts it predicts (:meth:`evolve.eval.costs.Costs.at_context`), the dataset's mean context
(:mod:`evolve.harvest.context`) in the search, the comparison and the export's pricing, and the run's in ``live``."""
from __future__ import annotations

import json
import os

import pytest

from evolve.errors import InputError, InputWarning
from evolve.eval.costs import costs_from_dict, load_costs
from evolve.harvest.context import at_dataset_context, mean_context
from evolve.perf.costs import LONG_CONTEXT_LIMIT, LONG_CONTEXT_SPAN, MIN_CONTEXT_SPAN, long_context

SHORT = {"target_forward_s": [0.020, 0.026, 0.040], "draft_token_s": 1e-4, "plain_token_s": 0.021,
         "context_tokens": 100}
LONG = {"context_tokens": 900, "target_forward_s": [0.024, 0.034, 0.036], "plain_token_s": 0.025}


def _doc(**long) -> dict:
    return {**SHORT, "long_context": {**LONG, **long}}


def test_at_context_moves_every_time_along_the_line_through_its_two_timings():
    costs = costs_from_dict(_doc(), "c.json")
    assert costs.context_tokens == 100
    at = costs.at_context(500)  # half way: the mean of the two timings
    assert at.target_forward_s[:2] == pytest.approx((0.022, 0.030))
    assert at.plain_token_s == pytest.approx(0.023) and at.draft_token_s == costs.draft_token_s
    assert at.target_forward_s[2] == pytest.approx(0.040)  # a falling pair (timing noise) is taken as flat
    assert at.context_tokens == 500 and at.extra["priced_at_context_tokens"] == 500 and at.source == "c.json"
    far = costs.at_context(1700)  # beyond the long timing: extrapolated on the same line
    assert far.target_forward_s[0] == pytest.approx(0.028) and far.plain_token_s == pytest.approx(0.029)
    assert costs.at_context(100).target_forward_s == pytest.approx(costs.target_forward_s)
    near = costs.at_context(0)  # shorter than the short timing: below it, never below the smallest time
    assert near.target_forward_s[0] == pytest.approx(0.0195) and min(costs.at_context(-10 ** 9).target_forward_s) > 0
    # the cost of a call grows with the context, and faster for a call over more tokens (as llama.cpp's kernels do)
    assert far.forward_seconds(2) / far.forward_seconds(1) > costs.forward_seconds(2) / costs.forward_seconds(1)


def test_a_file_timed_at_one_context_is_used_as_timed_and_a_priced_model_is_priced_once():
    costs = costs_from_dict(SHORT, "c.json")
    assert costs.at_context(5000) is costs and costs.context_tokens == 100
    with_long = costs_from_dict(_doc(), "c.json")
    assert with_long.at_context(None) is with_long and with_long.at_context(float("nan")) is with_long
    priced = with_long.at_context(500)
    assert priced.at_context(900) is priced and at_dataset_context(priced, "anywhere") is priced
    assert "long_context" not in priced.extra and priced.extra["timed_at_context_tokens"] == [100, 900]
    assert "long_context" not in priced.to_dict() and priced.to_dict()["plain_token_s"] == pytest.approx(0.023)


@pytest.mark.parametrize("change,words", [
    ({"long_context": [1]}, "key 'long_context' must be an object"),
    ({"context_tokens": None}, "key 'context_tokens': expected the whole number"),
    ({"context_tokens": 12.5}, "key 'context_tokens': expected the whole number"),
    ({"long_context": {**LONG, "context_tokens": 100}},
     r"'long_context.context_tokens': .*above 'context_tokens' \(100\)"),
    ({"long_context": {**LONG, "target_forward_s": [0.02]}}, r"'long_context.target_forward_s' must be a list of 3"),
    ({"long_context": {**LONG, "target_forward_s": [0.02, -1, 0.03]}}, r"'target_forward_s', item 1 \(T = 2\)"),
    ({"long_context": {**LONG, "plain_token_s": "fast"}}, r"'long_context', 'plain_token_s': expected seconds"),
    ({"long_context": {**LONG, "target_forward_s": [0.03, 0.02, 0.03]}},
     r"'long_context.target_forward_s', item 1 \(T = 2\): .* more than 15% below item 0"),
])
def test_a_bad_long_context_is_one_line_naming_the_file_and_key(tmp_path, change, words):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**_doc(), **change}))
    with pytest.raises(InputError, match=words) as err:
        load_costs(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_the_long_context_repeats_the_prompt_within_the_limit_and_ends_as_it_does():
    prompt = [7, 8, 9, 10]
    ids = long_context(prompt, 8)
    assert len(ids) == 8 + LONG_CONTEXT_SPAN and ids[-8:] == prompt * 2  # ends at the prompt's end (its header)
    assert len(long_context(prompt, 8, limit=300)) == 300 and long_context(prompt, 8, limit=300)[-4:] == prompt
    assert len(long_context(prompt, 1500)) == LONG_CONTEXT_LIMIT
    with pytest.warns(InputWarning, match="fewer than 128: the file is timed at one context"):
        assert long_context(prompt, 8, limit=8 + MIN_CONTEXT_SPAN - 1) is None
    assert long_context([], 8) is None


@pytest.fixture(scope="module")
def harvested(llama_files):
    """A prompt-lookup harvest of the tiny target (greedy, gamma 3, up to 64 tokens): texts.jsonl and three splits."""
    from harvest_helpers import lookup_harvest

    return lookup_harvest(llama_files, "out-context")


def _long_file(tmp_path, engine: str | None = None) -> str:
    path = tmp_path / "long.json"
    doc = {**_doc(), "target_forward_s": [0.020, 0.026, 0.030, 0.034], **({"engine": engine, "measured_in":
                                                                         "engine loop"} if engine else {})}
    doc["long_context"] = {**LONG, "context_tokens": 200, "target_forward_s": [0.030, 0.040, 0.050, 0.060]}
    path.write_text(json.dumps(doc))
    return str(path)


def test_the_mean_context_of_a_harvest_is_the_mean_over_its_emitted_tokens(harvested):
    texts = [json.loads(line) for line in open(os.path.join(harvested, "texts.jsonl"))]
    assert len({t["prompt_tokens"] for t in texts}) > 1 and all(t["tokens"] > 1 for t in texts)
    before = [t["prompt_tokens"] + j for t in texts for j in range(t["tokens"])]  # the token emitted j-th
    assert mean_context(harvested) == pytest.approx(sum(before) / len(before))
    test = [t["prompt_tokens"] + j for t in texts if t["split"] == "test" for j in range(t["tokens"])]
    assert mean_context(harvested, ["test"]) == pytest.approx(sum(test) / len(test))
    assert mean_context(None) is None


def _rewritten(harvested, tmp_path, change) -> str:
    """A copy of the harvest whose texts.jsonl lines went through ``change`` (its metadata's record of the file
    updated, so that it is still the dataset's own)."""
    import shutil

    from evolve.files.digest import sha256_file

    out = tmp_path / "copy"
    shutil.copytree(harvested, out)
    lines = [json.loads(line) for line in open(out / "texts.jsonl")]
    (out / "texts.jsonl").write_text("".join(json.dumps(change(t)) + "\n" for t in lines))
    meta = json.loads((out / "metadata.json").read_text())
    meta["files"]["texts.jsonl"]["sha256"] = sha256_file(out / "texts.jsonl")
    (out / "metadata.json").write_text(json.dumps(meta))
    return str(out)


def test_an_older_harvest_gives_its_prompt_lengths_by_its_ids_or_is_priced_as_timed(harvested, tmp_path):
    ids = _rewritten(harvested, tmp_path / "a", lambda t: {**{k: v for k, v in t.items() if k != "prompt_tokens"},
                                                           "prompt_ids": [3] * t["prompt_tokens"]})
    assert mean_context(ids) == pytest.approx(mean_context(harvested))  # a suffix harvest's texts hold their ids
    none = _rewritten(harvested, tmp_path / "b", lambda t: {k: v for k, v in t.items() if k != "prompt_tokens"})
    assert mean_context(none) is None
    costs = load_costs(_long_file(tmp_path))
    with pytest.warns(InputWarning, match="gives no prompt lengths .* used at the 100 tokens of context it was timed"):
        assert at_dataset_context(costs, none) is costs


def test_a_synthetic_dataset_has_no_context_and_is_priced_as_timed(independent_dataset, tmp_path):
    costs = load_costs(_long_file(tmp_path))
    assert mean_context(independent_dataset) is None
    assert at_dataset_context(costs, independent_dataset) is costs


def test_the_search_the_comparison_and_the_export_price_at_the_datasets_context(harvested, tmp_path):
    from evolve.commands.compare.table import BenchmarkOptions, cost_model
    from evolve.commands.rules import rule_named
    from evolve.export.engines.priced import priced_policy
    from evolve.search.config import resolve

    path = _long_file(tmp_path, "llama-cpp-python")
    context = mean_context(harvested)
    want = load_costs(path).at_context(context)
    assert 0 < context and want.target_forward_s != load_costs(path).target_forward_s
    assert resolve({"data": harvested, "costs": path, "evolve": "verify-length"}).cost_model == want
    assert cost_model(BenchmarkOptions(data_dir=harvested, costs=path)) == want
    from evolve.commands.compare.table import benchmark
    _, text = benchmark(BenchmarkOptions(data_dir=harvested, costs=path, split="test", repeats=1, fmt="table"))
    assert f"priced at {context:.0f} tokens of context (the dataset's mean)" in " ".join(text.split())
    priced = priced_policy(rule_named("fixed_gamma:gamma=2"), harvested, path, None, "llama-cpp-python")
    assert priced.plain == pytest.approx(1 / want.plain_token_s)
    assert f"at {context:.0f} tokens of context (the dataset's mean)" in priced.notes[0] and priced.context == context
    from evolve.export.engines.priced import priced_table
    assert f"at {context:.0f} tokens of context" in " ".join(priced_table(priced, "x", harvested, path).split())


def test_perf_times_the_backend_again_after_a_long_context(llama_files, tmp_path, monkeypatch):
    from click.testing import CliRunner

    import evolve.harvest.loop as loop
    from evolve.cli.perf import perf
    from evolve.perf.costs import PLAIN_RUN

    started, build = [], loop.build

    def spied(config):  # the context lengths the backend's cache is filled with, timing by timing
        setup = build(config)
        start = setup.engine.start
        setup.engine.start = lambda batch, row, seq, ctx, rng: (started.append(len(ctx)),
                                                                 start(batch, row, seq, ctx, rng))[1]
        return setup

    monkeypatch.setattr(loop, "build", spied)
    out = tmp_path / "costs.json"
    result = CliRunner().invoke(perf, ["--write-costs", str(out), "--harvest", llama_files["target"],
                                       "--harvest-prompts", llama_files["prompts"], "--gamma-max", "2",
                                       "--cost-repeats", "1", "--threads", "1", "--draft-ngram", "2,1"])
    assert result.exit_code == 0, result.output
    costs = load_costs(out)
    long = costs.extra["long_context"]
    n0, room = costs.extra["context_tokens"], 256 - (2 + 1 + PLAIN_RUN)  # the tiny Llama's 256 positions
    assert long["context_tokens"] == min(n0 + LONG_CONTEXT_SPAN, room) > n0 + 128
    assert started == [n0, long["context_tokens"]]  # the second timing fills the cache with the long context
    assert len(long["target_forward_s"]) == 3 and long["plain_token_s"] > 0
    assert costs.at_context(long["context_tokens"]).target_forward_s == pytest.approx(
        [max(a, b) for a, b in zip(costs.target_forward_s, long["target_forward_s"])])
    assert f"after {long['context_tokens']} tokens of context" in result.output


def test_plain_decoding_counts_the_context_before_each_token_it_emits(llama_files):
    """``benchmark.py live`` prices its calls at plain decoding's mean context: the tokens before each emitted token,
    the prompt's and the answer's so far, summed over texts (:attr:`evolve.live.decoding.LiveCounts.mean_context`)."""
    pytest.importorskip("torch")
    from evolve.harvest.config import HarvestConfig
    from evolve.harvest.loop import build, text_rng
    from evolve.live.decoding import LiveCounts, autoregressive_text

    engine = build(HarvestConfig(target=llama_files["target"], prompts=llama_files["prompts"], ngram=(2, 1),
                                 threads=1)).engine
    total, before = LiveCounts(), []
    for i, ids in enumerate(([1, 5, 9, 12], [1, 7] * 10)):
        generated, counts = autoregressive_text(engine, ids, 9, text_rng(5, i))
        before += [len(ids) + j for j in range(len(generated))]
        total.add(counts)
    assert total.tokens == len(before) > 9
    assert total.mean_context == pytest.approx(sum(before) / len(before))
    assert LiveCounts().mean_context is None


def test_an_engine_whose_long_timing_fails_writes_a_file_timed_at_one_context(llama_files, monkeypatch):
    """``perf --write-costs --engine``: when the engine cannot be timed after the long context (here its greedy answer
    ends at once there), the file keeps the timing at the first context, with a one-line warning; at the first
    context the same failure is the command's error."""
    from transformers import AutoTokenizer

    import evolve.perf.engine_loop as engine_loop
    from evolve.harvest.config import HarvestConfig
    from evolve.perf.engine_loop import EngineLoop, measure_engine_costs

    short = []

    def plain(ids, n):
        short.append(len(ids))
        return ([5] * n if len(short) == 1 or len(ids) == short[0] else [5]), [0.01] * n

    loop = EngineLoop("fake", "1.0", AutoTokenizer.from_pretrained(llama_files["target"]), plain,
                      lambda ids, answer, k: [0.01 * (k + 1)], lambda ids, n, gamma: (0.001, 2, 1), threads=1,
                      method={"plain_token_s": "", "target_forward_s": "", "draft_token_s": ""})
    monkeypatch.setattr(engine_loop, "open_engine", lambda name, config: loop)
    config = HarvestConfig(target=llama_files["target"], prompts=llama_files["prompts"], ngram=(2, 1), threads=1)
    with pytest.warns(InputWarning, match="no long_context: .* ends after 1 tokens.*timed at one context"):
        doc = measure_engine_costs(config, "fake", 2, 1)
    assert "long_context" not in doc and doc["target_forward_s"] == pytest.approx([0.01, 0.02, 0.03])
    assert len(set(short)) == 2  # it was tried after a longer context
