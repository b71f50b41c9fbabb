"""Suffix decoding (evolve/engine/suffix.py, arctic-inference 0.3.0): the drafter, its columns, its cache's order, its
rule as competitor rows, its live decoding and its vLLM file, on the tiny offline models.

CI installs arctic-inference (``.ci/run``); elsewhere these tests skip where it is missing (:func:`require`), and the
one-line refusal without it is tested by faking its absence.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from engine_helpers import require
from evolve.cli.benchmark import cli as benchmark_cli
from evolve.cli.evolve import cli as evolve_cli
from evolve.cli.generate import cli as generate_cli
from evolve.errors import InputError

pytestmark = pytest.mark.usefixtures("one_thread")
REPO = Path(__file__).resolve().parent.parent
GPU_LIKE = REPO / "docs" / "costs" / "gpu_like.json"


def _ok(cli, args):
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0, (args, res.output)
    return res


@pytest.fixture(scope="module")
def repeating(llama_files, tmp_path_factory):
    """A prompts file whose texts repeat one another (so responses of earlier texts match later ones)."""
    root = tmp_path_factory.mktemp("suffix")
    base = ["w1 w2 w3 w4 w5 w6 w1 w2 w3", "w7 w8 w9 w1 w2 w3 w7 w8", "w4 w5 w6 w7 w8 w9 w4 w5"]
    lines = [base[i % 3] + f" w{10 + i}" for i in range(15)]
    path = root / "p.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def harvest(llama_files, repeating, tmp_path_factory):
    require("arctic_inference.suffix_decoding")
    out = tmp_path_factory.mktemp("suffix-harvest") / "d"
    _ok(generate_cli, ["harvest", "--target", llama_files["target"], "--prompts", repeating, "--draft-suffix", "16,50",
                       "--gamma", "4", "--max-new-tokens", "20", "--temperature", "0", "--out", out])
    return out


def test_the_harvest_records_the_suffix_columns_and_the_cache_order(harvest):
    from evolve.traces.io import load_dataset, load_metadata

    meta = load_metadata(harvest)
    drafter = meta["config"]["drafter"]
    assert drafter["kind"] == "suffix" and drafter["library"] == "arctic-inference 0.3.0"
    assert "train, then valid, then test" in drafter["cache"]
    data = load_dataset(harvest)
    for split, tr in data.items():
        cols = {c: tr[c] for c in ("suffix_match_len", "suffix_prob", "suffix_cumprob", "suffix_score",
                                   "suffix_from_cache")}
        assert (cols["suffix_prob"] > 0).all() and (cols["suffix_cumprob"] <= cols["suffix_prob"] + 1e-12).all()
        starts = np.flatnonzero(tr["draft_index"] == 0)
        for a, b in zip(starts, np.append(starts[1:], tr.n)):  # one draft: match, score, source the same in a block
            for c in ("suffix_match_len", "suffix_score", "suffix_from_cache"):
                assert np.all(cols[c][a:b] == cols[c][a]), (split, c)
            assert np.allclose(np.cumprod(cols["suffix_prob"][a:b]), cols["suffix_cumprob"][a:b])
    # train is decoded first: its very first text cannot draft from earlier responses; later splits do
    assert data["test"]["suffix_from_cache"].any()
    texts = [json.loads(line) for line in (harvest / "texts.jsonl").read_text().splitlines()]
    assert all(isinstance(t["prompt_ids"], list) and isinstance(t["completion_ids"], list) for t in texts)


def test_the_cache_sees_earlier_splits_only(harvest, llama_files):
    """Replaying the texts of the earlier splits in order into a fresh drafter gives every test record's draft: the
    test drafts were made from train's and valid's responses and earlier test texts only."""
    from evolve.engine.suffix import SuffixDrafter
    from evolve.harvest.subset import request_history, read_texts

    history = request_history(harvest, "test")
    texts = [t for t in read_texts(harvest, categories=False)]
    assert len(history) == sum(t["split"] in ("train", "valid") for t in texts)
    drafter = SuffixDrafter(16, 50, 32)
    for prompt, response in history:
        drafter.warm(None, prompt, response)
    test = pd.read_parquet(harvest / "test.parquet")
    first = min(test["seq_id"])
    t = next(t for t in texts if t["seq_id"] == first)
    drafter.current = drafter._new_request()
    drafter.cache.start_request(drafter.current, np.asarray(t["prompt_ids"], dtype=np.int32))
    drafter.seen[drafter.current] = len(t["prompt_ids"])
    rows = test[test["seq_id"] == first]
    block = rows.iloc[:int(np.argmax(rows["draft_index"].to_numpy()[1:] == 0)) + 1 or len(rows)]
    position = int(block["position"].iloc[0])
    ctx = t["prompt_ids"] + t["completion_ids"][:position]
    drafter.sync(ctx)  # the text's response so far enters its own tree and the global one
    tokens, probs, match, score, from_cache = drafter.speculate(drafter.current, ctx)
    assert match == int(block["suffix_match_len"].iloc[0]) and from_cache == int(block["suffix_from_cache"].iloc[0])
    assert np.allclose(probs[:len(block)], block["suffix_cumprob"].to_numpy())


def test_suffix_rows_and_a_search_on_the_harvest(harvest, tmp_path):
    doc = json.loads(_ok(benchmark_cli, ["--data", harvest, "--costs", GPU_LIKE, "--repeats", "1", "--format",
                                         "json"]).stdout)
    rows = {r["heuristic"]: r for r in doc["rows"]}
    assert {"suffix_vllm_default", "suffix_tuned"} <= set(rows)
    assert "suffix_decoding_max_tree_depth=24" in rows["suffix_vllm_default"]["expression"]
    assert rows["suffix_tuned"]["tokens_per_second"] <= rows["length_oracle"]["tokens_per_second"] + 1e-9
    res = _ok(evolve_cli, ["run", "--data", harvest, "--evolve", "verify-length", "--objective", "tokens_per_second",
                           "--costs", GPU_LIKE, "--gamma", "4", "--population", "16", "--generations", "1", "--out",
                           tmp_path / "runs", "--no-progress"])
    run = Path(res.stdout.strip().splitlines()[-1])
    summary = json.loads((run / "run.json").read_text())
    assert "suffix_match_len" in summary["features"]
    assert any(s["name"].startswith("suffix_rule:") for s in summary["seeded_rules"])
    text = _ok(evolve_cli, ["export", run, "--to", "vllm"]).stdout
    assert "speculative-config: {" in text, text  # under GPU-like costs suffix decoding pays on repeating prompts
    spec = json.loads(text.split("speculative-config: ", 1)[1].splitlines()[0])
    assert spec["method"] == "suffix"
    speculative = require("vllm.config.speculative")
    config = speculative.SpeculativeConfig(**spec)
    assert config.method == "suffix" and config.num_speculative_tokens == spec["num_speculative_tokens"]
    refused = CliRunner().invoke(evolve_cli, ["export", str(run), "--to", "sglang", "--data", str(harvest), "--costs",
                                              str(GPU_LIKE)])
    assert refused.exit_code == 2 and "has no suffix decoding" in refused.stderr and "nearest" in refused.stderr


def test_live_decoding_runs_the_library_with_each_rows_own_cache(harvest, llama_files, repeating):
    doc = json.loads(_ok(benchmark_cli, ["live", "--target", llama_files["target"], "--draft-suffix", "16,50",
                                         "--prompts", repeating, "--data", harvest, "--split", "test", "--rule",
                                         "standard_rejection", "--temperature", "0", "--gamma", "4",
                                         "--max-new-tokens", "20", "--format", "json"]).stdout)
    row = doc[0] if isinstance(doc, list) else doc["rows"][0]
    assert row["rule"] == "standard_rejection" and row["same_text"] == 1.0 and row["tokens_per_call"] >= 1.0


def test_refusals(llama_files, repeating, tmp_path, monkeypatch):
    base = ["harvest", "--target", llama_files["target"], "--prompts", str(repeating), "--out", str(tmp_path / "o")]
    for value, words in (("1", "DEPTH must be in"), ("999", "DEPTH must be in"), ("16,1000000", "CACHED must be in"),
                         ("16,1,2", "DEPTH or DEPTH,CACHED"), ("16,-1", "integers >= 0"), ("x", "integers >= 0")):
        res = CliRunner().invoke(generate_cli, [*base, "--draft-suffix", value])
        assert res.exit_code == 2 and words in res.stderr and "--draft-suffix" in res.stderr, res.output
    for value in ("16", "16,0"):  # CACHED 0: the prompt alone, a value the option takes
        res = CliRunner().invoke(generate_cli, [*base, "--draft-suffix", value, "--batch-size", "2"])
        assert res.exit_code == 2 and "one text at a time" in res.stderr and "--batch-size" in res.stderr
    import evolve.engine.suffix as sfx

    monkeypatch.setattr(sfx, "physical_memory", lambda: 2 ** 30)
    res = CliRunner().invoke(generate_cli, [*base, "--draft-suffix", "16,100000", "--max-new-tokens", "4096"])
    assert res.exit_code == 2 and "more than half of this machine's" in res.stderr
    monkeypatch.undo()

    def missing(*args, **kwargs):
        raise InputError("suffix decoding needs the package arctic-inference 0.3.0: pip install ...", param="suffix")

    monkeypatch.setattr(sfx, "import_suffix", missing)
    res = CliRunner().invoke(generate_cli, [*base, "--draft-suffix", "16"])
    assert res.exit_code == 2 and "arctic-inference" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    if os.environ.get("CI") or __import__("importlib").util.find_spec("arctic_inference"):
        from importlib import metadata

        monkeypatch.undo()
        monkeypatch.setattr(metadata, "version", lambda name: "0.2.9" if name == "arctic_inference" else "0")
        with pytest.raises(InputError, match="version 0.2.9 is installed"):
            sfx.import_suffix()


def test_a_sharded_harvest_refuses_a_shared_cache(llama_files, repeating, tmp_path):
    res = CliRunner().invoke(generate_cli, ["harvest", "--target", llama_files["target"], "--prompts", str(repeating),
                                            "--draft-suffix", "16", "--shards", "2", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "shares a cache across texts" in res.stderr


def test_a_run_targeting_llama_cpp_python_exports_a_suffix_draft_model(harvest, tmp_path):
    """``run --target-engine llama-cpp-python`` on a suffix harvest reads the suffix columns the module gives; its
    champion exports as ``PolicySuffixDecoding`` with the harvest's depth, cache and gamma, priced under a cost file of
    the engine's loop (the fastest of the champion, plain decoding and the fixed lengths written)."""
    from evolve.export.engines.llama_cpp_python import SUFFIX_VALUES

    res = _ok(evolve_cli, ["run", "--data", harvest, "--evolve", "verify-length", "--objective", "tokens_per_second",
                           "--costs", GPU_LIKE, "--gamma", "4", "--target-engine", "llama-cpp-python", "--population",
                           "12", "--generations", "1", "--out", tmp_path / "runs", "--no-progress"])
    run = Path(res.stdout.strip().splitlines()[-1])
    features = json.loads((run / "run.json").read_text())["features"]
    assert set(features) == set(SUFFIX_VALUES)
    text = _ok(evolve_cli, ["export", run, "--to", "llama-cpp-python"]).stdout
    assert "class PolicySuffixDecoding(_PolicyDraft)" in text and "DEPTH, CACHED, GAMMA = 16, 50, 4" in text
    assert "class PolicyPromptLookup" not in text
    loop = tmp_path / "loop.json"
    loop.write_text(json.dumps({"target_forward_s": [0.02 * (1 + 0.05 * t) for t in range(5)], "draft_token_s": 1e-5,
                                "plain_token_s": 0.02, "engine": "llama-cpp-python", "measured_in": "engine loop"}))
    priced = _ok(evolve_cli, ["export", run, "--to", "llama-cpp-python", "--costs", loop, "--output",
                              tmp_path / "draft.py"])
    assert "(written)" in priced.stdout and "class PolicySuffixDecoding" in (tmp_path / "draft.py").read_text()
    rule = CliRunner().invoke(evolve_cli, ["export", "fixed_gamma:gamma=3", "--to", "llama-cpp-python", "--data",
                                           str(harvest), "--costs", str(loop)])  # no harvest on record: refused
    assert rule.exit_code == 2 and "has no champion file" in rule.stderr and "drafted by suffix" in rule.stderr
    lookup = CliRunner().invoke(evolve_cli, ["run", "--data", str(harvest), "--evolve", "verify-length",
                                             "--target-engine", "llama-cpp-python", "--features",
                                             "draft_index,lookup_len", "--out", str(tmp_path / "r2"), "--no-progress"])
    assert lookup.exit_code == 2 and "'lookup_len' is not given by llama-cpp-python's drafter" in lookup.stderr
