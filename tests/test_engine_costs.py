"""``benchmark.py perf --write-costs FILE --engine NAME``: cost files timed inside llama-cpp-python's and transformers'
own loops (:mod:`evolve.perf.engine_loop`), on tiny models built offline."""
from __future__ import annotations

import os
import warnings

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402

from evolve.cli.benchmark import cli  # noqa: E402
from evolve.errors import InputError  # noqa: E402
from evolve.eval.costs import load_costs  # noqa: E402
from evolve.harvest.config import HarvestConfig  # noqa: E402
from evolve.perf.engine_loop import (ENGINE_LOOPS, kept_iterations, measure_engine_costs, open_engine,  # noqa: E402
                                     replay_tokens)
import test_live  # noqa: E402

tiny_files, one_thread = test_live.files, test_live.one_thread


def test_replay_proposes_the_answer_while_the_text_follows_it():
    ids, answer = [5, 6], [7, 8, 9, 10]
    assert replay_tokens([5, 6], ids, answer, 2) == [7, 8]
    assert replay_tokens([5, 6, 7], ids, answer, 3) == [8, 9, 10]
    assert replay_tokens([5, 6, 7, 8, 9, 10], ids, answer, 2) == []  # the answer is used up
    assert replay_tokens([5, 6, 4], ids, answer, 2) == []  # the text left the answer
    assert replay_tokens([5, 6, 7], ids, answer, 0) == []


def test_only_iterations_that_kept_every_draft_are_timed():
    # (text length, entered, returned): +3 kept both drafts, +1 kept none, +3 again
    calls = [(10, 0.0, 0.1), (13, 1.1, 1.2), (14, 2.0, 2.1), (17, 3.6, 3.7)]
    assert kept_iterations(calls, 2) == pytest.approx([1.0, 1.5])
    assert kept_iterations(calls[:1], 2) == []


def _config(files, **kw) -> HarvestConfig:
    return HarvestConfig(**{**dict(target=files["target"], prompts=files["prompts"], ngram=(2, 1), threads=1), **kw})


def _check_file(doc: dict, engine: str, version: str, gamma_max: int) -> None:
    assert doc["engine"] == engine and doc["engine_version"] == version and doc["measured_in"] == "engine loop"
    assert len(doc["target_forward_s"]) == gamma_max + 1
    assert all(n > 0 for n in doc["iterations_timed"])  # every T timed from iterations that kept their drafts
    assert set(doc["method"]) == {"plain_token_s", "target_forward_s", "draft_token_s"}
    assert doc["draft_token_s"] > 0 and doc["drafted_tokens_per_call"] <= gamma_max
    assert doc["plain_tokens_per_s"] == pytest.approx(1 / doc["plain_token_s"])


def test_transformers_loop_times_plain_replayed_blocks_and_its_prompt_lookup(tiny_files, one_thread, tmp_path):
    import transformers

    doc = measure_engine_costs(_config(tiny_files), "transformers", 2, 1)
    _check_file(doc, "transformers", transformers.__version__, 2)
    assert doc["drafter"]["engine_class"] == "PromptLookupCandidateGenerator"
    out = tmp_path / "c.json"
    res = CliRunner().invoke(cli, ["perf", "--harvest", tiny_files["target"], "--harvest-prompts", tiny_files["prompts"],
                                   "--draft-ngram", "2", "--write-costs", str(out), "--engine", "transformers",
                                   "--gamma-max", "2", "--cost-repeats", "1", "--threads", "1"])
    assert res.exit_code == 0, res.output
    assert load_costs(out).extra["engine"] == "transformers"


def test_transformers_loop_times_an_assistant_model(tiny_files, one_thread):
    loop = open_engine("transformers", _config(tiny_files, ngram=None, draft=tiny_files["target"]))
    ids = [3, 4, 5, 3, 4, 5]
    seconds, tokens, calls = loop.draft(ids, 6, 2)
    assert loop.drafter["engine_class"] == "AssistedCandidateGenerator"
    assert seconds > 0 and calls >= 1 and 0 < tokens <= 2 * calls


def test_llama_cpp_python_loop_times_its_generate(tmp_path, monkeypatch):
    llama_cpp = pytest.importorskip("llama_cpp")
    from test_export_llama_cpp_python import llama_gguf

    path = llama_gguf(tmp_path, monkeypatch)
    prompts = tmp_path / "p.txt"
    prompts.write_text("abc abc abc de\n")
    doc = measure_engine_costs(HarvestConfig(target=str(path), prompts=str(prompts), ngram=(2, 1), threads=1),
                               "llama-cpp-python", 2, 1)
    _check_file(doc, "llama-cpp-python", llama_cpp.__version__, 2)
    assert doc["drafter"]["engine_class"] == "LlamaPromptLookupDecoding"


@pytest.mark.parametrize("engine,drafter,words", [
    ("llama-cpp-python", {"draft": "m.gguf"}, "ships one drafter, prompt lookup"),
    ("transformers", {"window": (1, 3)}, "ships prompt lookup and assistant models"),
])
def test_a_drafter_the_engine_does_not_ship_is_one_line(tiny_files, engine, drafter, words):
    if engine == "llama-cpp-python":
        pytest.importorskip("llama_cpp")
    with pytest.raises(InputError, match=words):
        open_engine(engine, HarvestConfig(target=tiny_files["target"], prompts=tiny_files["prompts"], **drafter))


def test_engine_needs_write_costs_and_a_known_name(tiny_files):
    res = CliRunner().invoke(cli, ["perf", "--engine", "transformers"])
    assert res.exit_code != 0 and "--engine goes with --write-costs" in res.output
    res = CliRunner().invoke(cli, ["perf", "--harvest", tiny_files["target"], "--draft-ngram", "2",
                                   "--write-costs", "x.json", "--engine", "vllm"])
    assert res.exit_code != 0 and "vllm" in res.output and "Traceback" not in res.output
    assert set(ENGINE_LOOPS) == {"llama-cpp-python", "transformers"}


def _llama_run(tmp_path, monkeypatch):
    """A live run's config on a tiny GGUF (two prompts, gamma 3, greedy) and a cost file timed in llama-cpp-python's
    loop for it."""
    from evolve.perf.costs import write_costs
    from test_export_llama_cpp_python import llama_gguf

    path = llama_gguf(tmp_path, monkeypatch)
    prompts = tmp_path / "p.txt"
    prompts.write_text("abc abc abc de\nxyz xyz\n")
    config = HarvestConfig(target=str(path), prompts=str(prompts), ngram=(2, 1), threads=1, gamma=3,
                           max_new_tokens=12, temperature=0.0)
    costs = tmp_path / "lcp.json"
    write_costs(costs, measure_engine_costs(config, "llama-cpp-python", 3, 1))
    return config, costs


def test_live_predicts_the_engine_rows_with_a_file_timed_in_that_engine(tmp_path, monkeypatch):
    """A cost file timed in llama-cpp-python's loop predicts the engine's rows (the exported policy's and its own prompt
    lookup's, each from the calls it made there) and its plain row, not this project's rows; without that peer in the
    run it is refused in one line naming both engines."""
    pytest.importorskip("llama_cpp")
    from evolve.commands.live import LiveOptions, live_command

    config, costs = _llama_run(tmp_path, monkeypatch)
    rule = "fixed_gamma:gamma=3"
    with pytest.raises(InputError, match="timed inside llama-cpp-python's loop.*backend torch without peer"):
        live_command(LiveOptions(config, rules=(rule,), costs=str(costs)))
    report, text = live_command(LiveOptions(config, rules=(rule,), costs=str(costs), peers=("llama-cpp-python",),
                                            peer_k=(("llama-cpp-python", 2),), bootstrap=40))
    rows = {r["rule"]: r for r in report.rows}
    own = dict(zip([r["rule"] for r in report.rows[len(report.counts):]], report.peer_counts))
    ours = rows[rule]
    mine, theirs = report.counts[0], own[f"llama-cpp-python {rule} (exported)"]
    # the module's calls inside Llama.generate, logged: our row's calls (greedy: the same drafts) but the first of each
    # of the two texts (the prefill's step, before the clock starts)
    assert theirs.target_calls == mine.target_calls - 2 and theirs.tokens == mine.tokens - 2
    assert all(mine.drafted[k] >= n for k, n in theirs.drafted.items()) and 3 in theirs.drafted
    # every call priced at the run's mean context (plain decoding's tokens), between the file's two timings
    context = report.autoregressive.mean_context
    file = load_costs(costs)
    assert file.extra["long_context"]["context_tokens"] > file.extra["context_tokens"]
    assert 0 < context != file.extra["context_tokens"]
    priced = file.at_context(context)
    assert priced.target_forward_s != file.target_forward_s
    for name in (f"llama-cpp-python {rule} (exported)", "llama-cpp-python prompt lookup K=2 (tuned)"):
        c = own[name]
        assert sum(c.drafted.values()) == c.target_calls > 0
        assert rows[name]["predicted_tokens_per_s"] == pytest.approx(c.tokens / c.predicted_seconds(priced))
        assert rows[name]["predicted_context_tokens"] == pytest.approx(context)
    assert set(own["llama-cpp-python prompt lookup K=2 (tuned)"].drafted) <= {0, 1, 2}
    assert own["llama-cpp-python plain"].drafted == {0: own["llama-cpp-python plain"].target_calls}
    assert rows["llama-cpp-python plain"]["predicted_tokens_per_s"] == pytest.approx(1 / priced.plain_token_s)
    assert f"priced at {context:.0f} tokens of context" in text
    assert ours["predicted_tokens_per_s"] is None
    assert "measured/predicted tokens/s" in text


def test_a_first_prompt_too_long_for_the_engines_context_is_named(tmp_path, monkeypatch):
    pytest.importorskip("llama_cpp")
    from evolve.perf import loop_llama_cpp_python
    from test_export_llama_cpp_python import llama_gguf

    monkeypatch.setattr(loop_llama_cpp_python, "N_CTX", 40)
    path = llama_gguf(tmp_path, monkeypatch)
    prompts = tmp_path / "p.txt"
    prompts.write_text("abc abc abc de\n")
    with pytest.raises(InputError, match=r"p.txt, line 1: the first prompt written twice \(\d+ tokens\) and \d+ more "
                                         r"do not fit the 40 tokens of context llama-cpp-python"):
        measure_engine_costs(HarvestConfig(target=str(path), prompts=str(prompts), ngram=(2, 1), threads=1),
                             "llama-cpp-python", 2, 1)


def test_live_predicts_transformers_prompt_lookup_from_its_own_calls(tiny_files, one_thread, tmp_path):
    """A file timed in transformers' loop predicts its prompt lookup rows (the configuration an export to transformers
    writes, decoded with --peer-k) from the calls generate() made: each call's candidates logged, at most K, every
    call verifying its candidates and one more token."""
    from evolve.commands.live import LiveOptions, live_command
    from evolve.perf.costs import write_costs

    config = _config(tiny_files, gamma=3, max_new_tokens=12, temperature=0.0)
    costs = tmp_path / "tf.json"
    write_costs(costs, measure_engine_costs(config, "transformers", 3, 1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report, text = live_command(LiveOptions(config, rules=("standard_rejection",), costs=str(costs),
                                                peers=("transformers",), peer_k=(("transformers", 2),), bootstrap=40))
    own = dict(zip([r["rule"] for r in report.rows[len(report.counts):]], report.peer_counts))
    rows = {r["rule"]: r for r in report.rows}
    for name, k in (("transformers prompt lookup K=2 (tuned)", 2), ("transformers prompt lookup K=10 (default)", 10)):
        c = own[name]
        assert sum(c.drafted.values()) == c.target_calls > 0 and max(c.drafted) <= k
        assert c.tokens <= c.target_calls + sum(d * n for d, n in c.drafted.items())  # at most drafts + 1 a call
        assert rows[name]["predicted_tokens_per_s"] == pytest.approx(
            c.tokens / c.predicted_seconds(load_costs(costs).at_context(report.autoregressive.mean_context)))
    assert own["transformers plain"].drafted == {0: own["transformers plain"].target_calls}
    # the file timed calls of T <= 4: a row verifying more in one call is said to be extrapolated, the others not
    beyond = [str(w.message) for w in caught if "extrapolates" in str(w.message)]
    longest = {name: max(c.drafted) + 1 for name, c in own.items()}
    assert [name for name in longest if any(f"'{name}'" in m for m in beyond)] == [
        name for name, t in longest.items() if t > 4]
    assert max(longest.values()) > 4  # the K=10 row drafted past the file here
    assert "transformers prompt lookup K=2 (tuned)" in text.split("predicted by the cost file")[1]


def test_two_champions_of_one_name_are_two_rows_each_predicted_from_its_own_calls(tmp_path, monkeypatch):
    """Two runs' champion files both name their rule ``champion``: live names each after its file, so their rows,
    their exported rows inside llama-cpp-python and those rows' predictions are told apart."""
    pytest.importorskip("llama_cpp")
    from evolve.commands.live import LiveOptions, live_command
    from heuristics.champions import Champion, save_champion

    config, costs = _llama_run(tmp_path, monkeypatch)
    files = []
    for run, expression in (("a", "sub(1.5, draft_index)"), ("b", "sub(3.5, draft_index)")):
        champ = Champion(name="champion", expression=expression, kind="verify-length", objective="tokens_per_second",
                         metrics={"train": {"tokens_per_call": 2.0}, "valid": {"tokens_per_call": 2.0}})
        (tmp_path / run).mkdir()
        files.append(save_champion(champ, tmp_path / run)[0])
    report, _ = live_command(LiveOptions(config, champions=tuple(files), costs=str(costs), peers=("llama-cpp-python",),
                                         peer_k=(("llama-cpp-python", 2),), bootstrap=40))
    names = [r["rule"] for r in report.rows]
    assert names[:2] == [f"champion ({files[0]})", f"champion ({files[1]})"]  # same file name: their paths
    exported = [f"llama-cpp-python {n} (exported)" for n in names[:2]]
    assert all(n in names for n in exported) and len(set(names)) == len(names)
    own = dict(zip(names[len(report.counts):], report.peer_counts))
    rows = {r["rule"]: r for r in report.rows}
    assert max(own[exported[0]].drafted) <= 2 < max(own[exported[1]].drafted)  # each its own policy's calls
    for name in exported:
        c = own[name]
        assert rows[name]["predicted_tokens_per_s"] == pytest.approx(c.tokens / c.predicted_seconds(
            load_costs(costs).at_context(report.autoregressive.mean_context)))
