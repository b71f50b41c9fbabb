"""``benchmark.py live --repeats N --peers ...``: repeated interleaved decoding with spread, and the speculation other
libraries ship (:mod:`evolve.live.peers`) decoded beside the rules, on tiny random models built offline."""
from __future__ import annotations

import os
from dataclasses import replace

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402

from evolve.cli.benchmark import cli  # noqa: E402
from evolve.errors import InputError  # noqa: E402
from evolve.harvest.config import HarvestConfig  # noqa: E402
from evolve.live.decoding import LiveCounts  # noqa: E402
from evolve.live.peers import PEERS, Peer, PeerRow, PeerSetup, peers_named, tune, tuned_row  # noqa: E402
from evolve.commands.live import LiveExtras, resolve_rules, run_live  # noqa: E402
from evolve.report.live import KEYS, format_json, format_table  # noqa: E402
import test_live  # noqa: E402

#: The tiny random Llama and prompts of test_live.py (its fixtures, under their names here).
tiny_files, one_thread = test_live.files, test_live.one_thread

MAX_NEW = 12


def _config(files, **kw) -> HarvestConfig:
    base = dict(target=files["target"], prompts=files["prompts"], gamma=3, max_new_tokens=MAX_NEW, seed=5,
                ngram=(2, 1), temperature=0.0)
    base.update(kw)
    return HarvestConfig(**base)


def test_repeats_report_medians_with_spread_and_intervals(tiny_files):
    rules = resolve_rules(["standard_rejection", "fixed_gamma:gamma=2"])
    seen = []
    report = run_live(_config(tiny_files), rules, lambda done, total: seen.append((done, total)),
                      extras=LiveExtras(repeats=3, bootstrap=40))
    assert seen[-1] == (9, 9)
    for row in report.rows:
        assert set(row) == set(KEYS) and row["repeats"] == 3 and row["engine"] == "evolve"
        assert row["tokens_per_s_min"] <= row["tokens_per_s"] <= row["tokens_per_s_max"]
        assert row["speedup_min"] <= row["speedup"] <= row["speedup_max"]
        assert row["speedup_low"] <= row["speedup_high"] and row["tokens_per_s_mad"] >= 0
        assert row["same_text"] == 1.0  # lossless, greedy: every decode is plain decoding's text
    assert report.rows[0]["tokens"] == 3 * report.counts[0].tokens // 3
    fastest, best = [r for r in report.rows if r["fastest_over"] is None], max(r["tokens_per_s"] for r in report.rows)
    plain = report.rows[0]["ar_tokens_per_s"]  # this project's plain decoding competes too, though not a row
    assert ([r["tokens_per_s"] for r in fastest] == [best] and best >= plain) or (not fastest and plain >= best)
    text = format_table(report)
    assert "3 repeats" in text and "Fastest configuration on this machine" in text and "min-max" in text
    assert '"speedup_low"' in format_json(report)


def test_one_repeat_keeps_the_rows_values(tiny_files):
    report = run_live(_config(tiny_files), resolve_rules(["standard_rejection"]))
    row, counts = report.rows[0], report.counts[0]
    assert row["repeats"] == 1 and row["tokens_per_s"] == counts.tokens_per_s
    assert row["speedup"] == counts.tokens_per_s / report.autoregressive.tokens_per_s
    assert "Same text" not in format_table(report)


def test_transformers_peer_rows_beside_ours(tiny_files):
    extras = LiveExtras(repeats=2, peers=(PEERS["transformers"],), peer_k=(("transformers", 2),), bootstrap=40)
    report = run_live(_config(tiny_files), resolve_rules(["standard_rejection"]), extras=extras)
    names = [r["rule"] for r in report.rows]
    assert names == ["standard_rejection", "transformers plain", "transformers prompt lookup K=10 (default)",
                     "transformers prompt lookup K=2 (tuned)"]
    peers = {r["rule"]: r for r in report.rows[1:]}
    assert all(r["engine"] == "transformers" and r["tokens"] > 0 for r in peers.values())
    plain = peers["transformers plain"]
    assert plain["speedup"] == 1.0 and plain["same_text"] == 1.0
    # greedy prompt lookup is lossless: transformers' text is its plain text (float32, a tiny model)
    assert all(r["same_text"] == 1.0 for r in peers.values())
    assert "transformers prompt lookup K=2 (tuned)" in format_table(report)


def test_tuning_picks_the_fastest_k():
    rates = {1: 10.0, 2: 30.0, 3: 20.0}

    def make(k):
        return lambda ids, n: ([], LiveCounts(tokens=int(rates[k]), seconds=1.0))
    row = PeerRow("x default", "x", make(1), make=make, label="x prompt lookup")
    assert tune(row, [[1, 2]], 4, grid=(1, 2, 3)) == 2
    assert tuned_row(row, 2).name == "x prompt lookup K=2 (tuned)"


def test_unknown_or_missing_peers_are_refused_in_one_line(monkeypatch):
    with pytest.raises(InputError, match="unknown peer 'vllm'"):
        peers_named(["vllm"])

    class Missing(Peer):
        name, package, install = "missing", "no_such_package_here", "pip install it"
    monkeypatch.setitem(PEERS, "missing", Missing())
    with pytest.raises(InputError, match="peer 'missing' needs the package no_such_package_here") as err:
        peers_named(["missing"])
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("args, words", [
    (["--peers", "transformers", "--temperature", "1"], "decode greedily"),
    (["--peers", "transformers", "--temperature", "0", "--peer-k", "transformers=x"], "PEER=K"),
    (["--peers", "transformers", "--temperature", "0", "--peer-k", "llama-cpp-python=2"], "not among the peers"),
    (["--peers", "nope", "--temperature", "0"], "unknown peer"),
    (["--bootstrap", "10"], "at least 40"),
])
def test_cli_refusals(tiny_files, args, words):
    res = CliRunner().invoke(cli, ["live", "--target", tiny_files["target"], "--prompts", tiny_files["prompts"],
                                   "--draft-ngram", "2", "--rule", "standard_rejection", *args])
    assert res.exit_code != 0 and words in res.output


def test_llama_cpp_python_peer_runs_the_exported_policy_losslessly(tmp_path, monkeypatch):
    """With llama-cpp-python: its plain, shipped prompt lookup and our exported policy rows on a tiny GGUF, each
    decoding plain greedy decoding's text."""
    pytest.importorskip("llama_cpp")
    from evolve.export.engines.llama_cpp_python import module_source
    from evolve.commands.rules import rule_named
    from test_export_llama_cpp_python import llama_gguf

    path = llama_gguf(tmp_path, monkeypatch)
    prompts = tmp_path / "p.txt"
    prompts.write_text("abc abc abc de\nxyz xyz\n")
    policy = rule_named("fixed_gamma:gamma=3")
    extras = LiveExtras(peers=(PEERS["llama-cpp-python"],), peer_k=(("llama-cpp-python", 2),), bootstrap=40,
                        exported=(("llama-cpp-python", policy.name, module_source(policy, "test", (2, 1), 3)),))
    report = run_live(HarvestConfig(target=str(path), prompts=str(prompts), gamma=3, max_new_tokens=MAX_NEW,
                                    ngram=(2, 1), temperature=0.0), resolve_rules([policy.name]), extras=extras)
    rows = {r["rule"]: r for r in report.rows if r["engine"] == "llama-cpp-python"}
    assert list(rows) == ["llama-cpp-python plain", "llama-cpp-python prompt lookup K=10 (default)",
                          "llama-cpp-python prompt lookup K=2 (tuned)", "llama-cpp-python fixed_gamma:gamma=3 (exported)"]
    assert all(r["same_text"] == 1.0 and r["tokens"] > 0 for r in rows.values())
    assert "runs at" in report.caption  # the backend's plain decoding against llama-cpp-python's


def test_transformers_peer_runs_the_exported_policy_inside_generate(tiny_files):
    """``--peers transformers`` with a verification-length policy: the policy exported for transformers' loop
    (:mod:`evolve.export.engines.transformers_generate`) is a row of that engine, decoding plain greedy decoding's
    text, its calls logged (one per step after the prefill's) so a cost file of transformers' loop prices them."""
    from evolve.commands.live import LiveOptions, exported_policies

    policy = "fixed_gamma:gamma=3"
    options = LiveOptions(config=_config(tiny_files), rules=(policy,), peers=("transformers",))
    exported = exported_policies(options, ["transformers"])
    assert [(e[0], e[1]) for e in exported] == [("transformers", policy)]
    extras = LiveExtras(peers=(PEERS["transformers"],), peer_k=(("transformers", 2),), bootstrap=40,
                        exported=exported)
    report = run_live(_config(tiny_files), resolve_rules([policy]), extras=extras)
    rows = {r["rule"]: (r, c) for r, c in zip(report.rows[len(report.counts):], report.peer_counts)}
    row, counts = rows[f"transformers {policy} (exported)"]
    assert row["engine"] == "transformers" and row["same_text"] == 1.0 and row["tokens"] > 0
    assert sum(counts.drafted.values()) == counts.target_calls > 0 and max(counts.drafted) <= 3
    assert any(k > 0 for k in counts.drafted)  # it drafted


#: The earlier splits' texts ((prompt ids, response ids)) a suffix-decoding row's cache starts from.
SUFFIX_HISTORY = (((5, 6, 7, 5, 6), (7, 5, 6, 7)),)


def _suffix_policy_counted(monkeypatch):
    """(a suffix-decoding policy, the list to which every new exported drafter appends the texts in its cache: the
    earlier splits' texts warmed into it)."""
    from evolve.live import peers
    from heuristics.contract import Rule

    policy = Rule("suffix_policy", "t", "t", expression="sub(mul(suffix_match_len, suffix_prob), add(1.0, draft_index))",
                  lossless=True, kind="verify-length")
    started, fresh = [], peers._SuffixHeld.fresh

    def counted(self):
        fresh(self)
        started.append(self.model._requests)
    monkeypatch.setattr(peers._SuffixHeld, "fresh", counted)
    return policy, started


def test_transformers_peer_runs_an_exported_suffix_policy_with_its_own_cache(tiny_files, monkeypatch):
    """With arctic-inference: a suffix-decoding run's policy inside transformers' generate(), one drafter across the
    texts of a repeat, started again (warmed with the earlier splits' texts) for every repeat, each text plain greedy
    decoding's."""
    pytest.importorskip("arctic_inference.suffix_decoding")
    from evolve.export.engines.transformers_generate import module_source

    policy, started = _suffix_policy_counted(monkeypatch)
    extras = LiveExtras(peers=(PEERS["transformers"],), peer_k=(("transformers", 2),), bootstrap=40, repeats=2,
                        history=SUFFIX_HISTORY,
                        exported=(("transformers", policy.name, module_source(policy, "test", gamma=3,
                                                                              suffix=(16, 50))),))
    config = replace(_config(tiny_files), ngram=None, suffix=(16, 50))
    report = run_live(config, [], extras=extras)
    rows = {r["rule"]: r for r in report.rows if r["engine"] == "transformers"}
    assert rows["transformers suffix_policy (exported)"]["same_text"] == 1.0
    assert all(r["tokens"] > 0 for r in rows.values())
    assert started == [1, 1, 1]  # the warm-up's drafter, then one per repeat, each holding the history alone


def test_a_policy_an_engine_cannot_run_gets_no_row_there_with_a_warning(tiny_files):
    """A policy reading a column the engine's drafter cannot give (the draft model's probability) is decoded on the
    backend only: the engine gets no exported row, and a one-line warning says why."""
    from evolve.commands.live import LiveOptions, exported_policies
    from evolve.errors import InputWarning

    policy = "confidence_threshold:h=0.5"
    options = LiveOptions(config=_config(tiny_files), rules=(policy,), peers=("transformers",))
    with pytest.warns(InputWarning, match=r"no row 'transformers confidence_threshold:h=0.5 \(exported\)'"):
        assert exported_policies(options, ["transformers", "llama-cpp-python"]) == ()


def test_task_group_table_lists_our_rows_only_when_peers_are_beside_them():
    """The per-task-group table has counts per category for plain decoding and our rules only; a peer row beside
    them (which has none) is not a column lookup past their end."""
    from evolve.live.decoding import LiveCounts
    from evolve.report.live import LiveReport, category_lines

    def counts(tokens, calls, seconds):
        c = LiveCounts()
        c.tokens, c.target_calls, c.seconds = tokens, calls, seconds
        return c

    ours = [counts(40, 40, 2.0), counts(40, 20, 1.0)]
    report = LiveReport([{"rule": "fixed_gamma:gamma=2"}, {"rule": "transformers plain"}], ours[0], "caption",
                        [ours[1]], {"writing": ours, "qa": ours})
    lines = category_lines(report)
    assert any(line.startswith("fixed_gamma:gamma=2") and "2.00 2.00x" in line for line in lines)
    assert not any(line.startswith("transformers plain") for line in lines)


def test_llama_cpp_python_peer_runs_an_exported_suffix_policy_with_its_own_cache(tmp_path, monkeypatch):
    """With llama-cpp-python and arctic-inference: a suffix-decoding run's exported policy runs as
    ``PolicySuffixDecoding`` inside ``Llama.generate``, one draft model across the texts of a repeat, started again
    (warmed with the earlier splits' texts) for every repeat, and decodes plain greedy decoding's text."""
    pytest.importorskip("llama_cpp")
    pytest.importorskip("arctic_inference.suffix_decoding")
    from evolve.export.engines.llama_cpp_python import module_source
    from test_export_llama_cpp_python import llama_gguf

    path = llama_gguf(tmp_path, monkeypatch)
    prompts = tmp_path / "p.txt"
    prompts.write_text("abc abc abc de\nabc abc de de\nxyz xyz abc\n")
    policy, started = _suffix_policy_counted(monkeypatch)
    extras = LiveExtras(peers=(PEERS["llama-cpp-python"],), peer_k=(("llama-cpp-python", 2),), bootstrap=40,
                        repeats=2, history=SUFFIX_HISTORY,
                        exported=(("llama-cpp-python", policy.name,
                                   module_source(policy, "test", gamma=3, suffix=(16, 50))),))
    report = run_live(HarvestConfig(target=str(path), prompts=str(prompts), gamma=3, max_new_tokens=MAX_NEW,
                                    suffix=(16, 50), temperature=0.0), [], extras=extras)
    rows = {r["rule"]: r for r in report.rows if r["engine"] == "llama-cpp-python"}
    assert "llama-cpp-python suffix_policy (exported)" in rows
    assert all(r["same_text"] == 1.0 and r["tokens"] > 0 for r in rows.values())
    assert started == [1, 1, 1]  # the warm-up's model, then one per repeat, each holding the history alone


def test_a_call_log_of_another_length_than_the_steps_leaves_the_calls_unpriced():
    """A peer row's per-call log is kept only when it has one entry per step counted by the clock; otherwise the
    row's calls are not priced (LiveCounts.drafted empty), never priced as the wrong calls."""
    from evolve.live.peers import _counts

    kept = _counts(7, 1.0, 3, [2, 0, 1])
    assert kept.target_calls == 3 and kept.drafted == {2: 1, 0: 1, 1: 1}
    for log in ([2, 0], [2, 0, 1, 1], None):
        c = _counts(7, 1.0, 3, log)
        assert c.target_calls == 3 and c.drafted == {}


def test_the_engines_rows_decode_with_the_backends_model_not_a_second_copy(tmp_path, monkeypatch):
    """On the llama_cpp backend, llama-cpp-python's rows (its plain decoding beside ours, its prompt lookup) decode
    with the ``Llama`` the backend loaded: one copy of the weights, and each row still plain greedy decoding's text."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from test_export_llama_cpp_python import llama_gguf

    path = llama_gguf(tmp_path, monkeypatch)
    prompts = tmp_path / "p.txt"
    prompts.write_text("abc abc abc de\nxyz xyz\n")
    made, init = [], llama_cpp.Llama.__init__

    def counted(self, *args, **kwargs):
        made.append(kwargs.get("n_ctx"))
        init(self, *args, **kwargs)
    monkeypatch.setattr(llama_cpp.Llama, "__init__", counted)
    extras = LiveExtras(peers=(PEERS["llama-cpp-python"],), peer_k=(("llama-cpp-python", 2),), bootstrap=40,
                        engine_plain=True)
    config = HarvestConfig(target=str(path), prompts=str(prompts), gamma=3, max_new_tokens=MAX_NEW, ngram=(2, 1),
                           temperature=0.0, backend="llama_cpp", threads=1)
    report = run_live(config, resolve_rules(["standard_rejection"]), extras=extras)
    assert len(made) == 1  # the backend's
    rows = {r["rule"]: r for r in report.rows if r["engine"] == "llama-cpp-python"}
    assert {"llama-cpp-python plain", "llama-cpp-python prompt lookup K=2 (tuned)"} <= set(rows)
    assert all(r["same_text"] == 1.0 and r["tokens"] > 0 for r in rows.values())
    # a Llama loaded otherwise than the peer would load it (other threads, a shorter context, no logits kept for
    # every position): the peer loads its own
    ours = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=1, n_threads_batch=1, logits_all=True,
                           verbose=False)
    setup = PeerSetup(str(path), 1, (0,), 256, shared=ours)
    for other, copies in ((setup, 2), (replace(setup, threads=2), 3), (replace(setup, n_ctx=512), 4)):
        PEERS["llama-cpp-python"].rows(other)
        assert len(made) == copies
    setup = replace(setup, shared=llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=1, n_threads_batch=1,
                                                  verbose=False))
    PEERS["llama-cpp-python"].rows(setup)
    assert len(made) == 6


def test_transformers_rows_share_the_torch_backends_float32_model_only(tiny_files, monkeypatch):
    """transformers' rows decode with the torch backend's model where it is float32 on their device; a bfloat16
    backend model is not what transformers' row would load, so the row loads its own (float32)."""
    from evolve.engine import models

    loads, load = [], models.load_model

    def counted(source, dtype="float32", device="cpu"):
        loads.append(dtype)
        return load(source, dtype, device)
    monkeypatch.setattr(models, "load_model", counted)
    extras = LiveExtras(engine_plain=True, bootstrap=40)
    report = run_live(_config(tiny_files, threads=1), [], extras=extras)
    assert [r["rule"] for r in report.rows] == ["transformers plain"] and report.rows[0]["same_text"] == 1.0
    assert loads == ["float32"]  # the backend's; the peer took it
    run_live(_config(tiny_files, threads=1, dtype="bfloat16"), [], extras=extras)
    assert loads == ["float32", "bfloat16", "float32"]


def _timed_entry(name, engine, rates, plain=False):
    """A live row decoded twice over len(rates) texts, 100 tokens each at ``rates[i]`` tokens/s on text i."""
    from evolve.live.rows import Entry

    e = Entry(name, engine, lambda i: None, plain)
    for r in range(2):
        for i, rate in enumerate(rates):
            c = LiveCounts()
            c.tokens, c.seconds, c.target_calls = 100, 100 / rate, 50
            e.results[r, i] = ([0], c)
    return e


def test_the_fastest_row_over_each_row_is_paired_over_the_texts():
    """Fastest/row: the fastest configuration's tokens/s over each row's, every text's repeats summed, with an interval
    from resampling the texts, the same draws for both: a row slower on every text is behind beyond the spread even
    where the texts' own speeds vary so much that the two rows' rates taken alone would overlap. This project's plain
    decoding competes for fastest (then every row gets a ratio)."""
    import numpy as np

    from evolve.live.rows import fastest_over
    from evolve.report.live import LiveReport

    def entry(name, rates):
        return _timed_entry(name, "evolve", rates)

    text_speed = np.linspace(10.0, 40.0, 12)  # texts whose own speeds differ fourfold
    ahead = 1.08 + 0.03 * np.sin(np.arange(12))  # 5-11% faster on each text
    entries = [entry("plain", text_speed * 0.9), entry("slow", text_speed), entry("fast", text_speed * ahead),
               entry("tie", text_speed * ahead)]
    rows = [{"rule": e.name, "tokens_per_s": 0.0} for e in entries[1:]]
    fastest_over(rows, entries, range(12), np.arange(12), 200)
    slow, fast, tie = rows
    assert fast["fastest_over"] is None
    assert slow["fastest_over"] == pytest.approx(1.08, abs=0.02)
    assert 1.0 < slow["fastest_over_low"] <= slow["fastest_over"] <= slow["fastest_over_high"]
    assert tie["fastest_over"] == pytest.approx(1.0) and np.isnan(tie["fastest_over_low"])  # the same on every text
    text = format_table(LiveReport([{**{k: 0.0 for k in KEYS}, **r, "repeats": 2, "engine": "evolve",
                                     "predicted_tokens_per_s": None} for r in rows],
                                   LiveCounts(), "caption"))
    lines = text.splitlines()
    assert any(" fastest " in f"{line} " for line in lines if line.startswith("fast "))  # the cell, not the footer
    assert any(line.startswith("slow ") and f"{slow['fastest_over']:.3f} [" in line for line in lines)
    # plain decoding fastest: no row is marked, each gets plain's tokens/s over its own
    entries[0] = entry("plain", text_speed * 1.5)
    fastest_over(rows, entries, range(12), np.arange(12), 200)
    assert all(r["fastest_over"] is not None for r in rows)
    assert slow["fastest_over"] == pytest.approx(1.5) and fast["fastest_over"] < slow["fastest_over"]


def test_the_fastest_row_of_each_engine_over_its_rows_is_paired_over_the_texts():
    """Engine's fastest/row: within each engine (its plain decoding among them), its fastest configuration over each
    of its rows, paired over the texts: an engine's exported policy ahead of its own prompt lookup on every text is
    ahead beyond the spread, though the fastest row overall is another engine's."""
    import numpy as np

    from evolve.live.rows import engine_fastest_over, fastest_over
    from evolve.report.live import LiveReport

    def entry(name, engine, rates, plain=False):
        return _timed_entry(name, engine, rates, plain)

    text_speed = np.linspace(10.0, 40.0, 12)
    ahead = 1.08 + 0.03 * np.sin(np.arange(12))
    entries = [entry("plain", "evolve", text_speed, True), entry("ours", "evolve", text_speed * 3.0),
               entry("tf plain", "transformers", text_speed, True), entry("tf lookup", "transformers", text_speed * 2),
               entry("tf exported", "transformers", text_speed * 2 * ahead)]
    rows = [{"rule": e.name, "engine": e.engine, "tokens_per_s": 0.0} for e in entries[1:]]
    fastest_over(rows, entries, range(12), np.arange(12), 200)
    engine_fastest_over(rows, entries, range(12), np.arange(12), 200)
    ours, tf_plain, lookup, exported = rows
    assert ours["fastest_over"] is None and ours["engine_fastest_over"] is None  # fastest overall and in its engine
    assert exported["engine_fastest_over"] is None and exported["fastest_over"] > 1  # transformers' fastest only
    assert lookup["engine_fastest_over"] == pytest.approx(1.08, abs=0.02) and lookup["engine_fastest_over_low"] > 1
    assert tf_plain["engine_fastest_over"] == pytest.approx(2 * 1.08, abs=0.05)
    text = format_table(LiveReport([{**{k: 0.0 for k in KEYS}, **r, "repeats": 2, "predicted_tokens_per_s": None}
                                    for r in rows], LiveCounts(), "caption"))
    assert "Engine's fastest/row" in text
    assert any(line.startswith("tf lookup ") and f"{lookup['engine_fastest_over']:.3f} [" in line
               for line in text.splitlines())  # the cell (a wide table continues in a second block, rule first)


def test_a_torch_model_is_shared_only_as_transformers_would_load_it():
    """float32 on the device asked for and no forward hook on any module (a drafter's capture would run inside
    transformers' loop); anything else, and transformers' row loads its own."""
    from evolve.live.peers import _float32_on

    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    assert _float32_on(model, "cpu") and not _float32_on(model, "meta") and not _float32_on(object(), "cpu")
    handle = model[0].register_forward_hook(lambda *a: None)
    assert not _float32_on(model, "cpu")
    handle.remove()
    assert _float32_on(model, "cpu") and not _float32_on(model.to(torch.bfloat16), "cpu")
