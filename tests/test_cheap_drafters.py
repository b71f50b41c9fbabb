"""The cheap drafters (n-gram prompt lookup, early exit), one-hot rows, zero-length drafts and
``benchmark.py perf --write-costs``, on the tiny offline Llama models of the harvest tests."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from evolve.engine.distributions import OneHot, block_records, distributions  # noqa: E402
from evolve.engine.ngram import lookup_columns, lookup_match  # noqa: E402
from evolve.errors import InputError  # noqa: E402
from evolve.eval.costs import load_costs  # noqa: E402
from evolve.harvest import loop as hv  # noqa: E402
from heuristics.registry import get_rule  # noqa: E402

from harvest_helpers import GAMMA, harvest_config, run_harvest  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def test_ngram_lookup_takes_the_latest_match_of_the_longest_n():
    ctx = [5, 6, 7, 9, 5, 6, 8, 4, 5, 6]
    assert lookup_match(ctx, 3, 2, 1) == ([8, 4, 5], 2)          # "5 6" last seen at 4 -> continues 8 4 5
    assert lookup_match(ctx, 3, 3, 3) == ([], 0)                  # "6 5 6" never seen before
    assert lookup_match([1, 2, 3], 4, 3, 1) == ([], 0)            # no repeat: no draft
    assert lookup_match([3, 1, 2, 3], 5, 1, 1) == ([1, 2, 3], 1)  # the continuation is cut at the text's end
    with pytest.raises(InputError):
        hv.HarvestConfig(target="t", prompts="p", ngram=(1, 2)).check()


def _lookup_reference(ctx, draft, n):
    """lookup_len, lookup_freq by plain loops: for token j, over every start s whose pattern (the last n tokens
    of ctx, then draft[:j]) fits before ctx's last token, the share followed by draft[j]."""
    freqs = []
    for j, x in enumerate(draft):
        pat = list(ctx[len(ctx) - n:]) + list(draft[:j])
        nxt = [ctx[s + len(pat)] for s in range(len(ctx) - len(pat)) if list(ctx[s:s + len(pat)]) == pat]
        freqs.append(sum(t == x for t in nxt) / len(nxt))
    return [n] * len(draft), freqs


def test_lookup_columns_count_the_earlier_continuations():
    ctx = [7, 1, 2, 3, 9, 1, 2, 4, 1, 2, 3, 5, 1, 2]
    draft, n = lookup_match(ctx, 3, 2, 1)
    assert (draft, n) == ([3, 5, 1], 2)           # "1 2" last seen at 8 -> 3 5 1
    cols = lookup_columns(ctx, draft, n)
    # "1 2" is followed by 3, 4, 3: 3 in 2 of 3; "1 2 3" by 9, 5: 5 in 1 of 2; "1 2 3 5" once, by 1
    np.testing.assert_allclose(cols["lookup_freq"], [2 / 3, 1 / 2, 1.0])
    assert cols["lookup_len"].tolist() == [2, 2, 2]
    rng = np.random.default_rng(3)
    for _ in range(200):
        ctx = rng.integers(0, 4, size=int(rng.integers(2, 30))).tolist()
        draft, n = lookup_match(ctx, 4, 3, 1)
        got = lookup_columns(ctx, draft, n)
        want = _lookup_reference(ctx, draft, n)
        assert got["lookup_len"].tolist() == want[0]
        np.testing.assert_allclose(got["lookup_freq"], want[1], rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="never follows"):
        lookup_columns([1, 2, 1, 2], [9], 1)


def test_one_hot_rows_give_the_dense_records_bit_for_bit():
    rng = np.random.default_rng(1)
    V, k = 50, 4
    p = rng.dirichlet(np.ones(V) * 0.3, k)
    drafts = rng.integers(0, V, k)
    u = rng.random(k)
    for pp in (p, OneHot(rng.integers(0, V, k), V)):
        dense_p = pp.dense() if isinstance(pp, OneHot) else pp
        q = OneHot(drafts, V)
        a = block_records(pp, q, np.zeros(k), np.zeros(k), list(drafts), u)
        b = block_records(dense_p, q.dense(), np.zeros(k), np.zeros(k), list(drafts), u)
        for col in a:
            if col == "block_residual_phi":
                np.testing.assert_array_equal(np.stack(a[col]), np.stack(b[col]))
            else:
                np.testing.assert_array_equal(a[col], b[col], err_msg=col)
    logits = torch.randn(3, V)
    ids, ent = distributions(logits, 0.0, sparse_greedy=True)
    dense, _ = distributions(logits, 0.0)
    np.testing.assert_array_equal(ids.dense(), dense)
    assert (ent == 0).all()


def test_ngram_records_are_valid_with_draft_prob_one(llama_files):
    from evolve.traces.schema import validate

    engine = hv.build(harvest_config(llama_files, llama_files["root"] / "unused", ngram=(2, 1))).engine
    prompts = [[1, 5, 9, 5, 9, 12], [1, 7, 8, 9], [1, 4, 4, 4]]
    done = engine.run_texts([(i, ids, hv.text_rng(11, i)) for i, ids in enumerate(prompts)], GAMMA, 30, 2)
    df = pd.concat([result.frame(i) for i, result in done], ignore_index=True)
    assert len(df) > 0
    validate(df, "ngram records")
    assert (df["draft_prob"] == 1.0).all() and (df["draft_entropy"] == 0.0).all()
    assert (df["draft_top_prob"] == 1.0).all()
    np.testing.assert_array_equal(df["overlap"], df["target_prob"])
    assert (df["draft_index"] < GAMMA).all()
    # the lookup columns of every block, from its context, as the reference and as live decoding's lookahead
    checked = 0
    for i, result in done_again(engine, prompts):
        for b in result.blocks:
            ctx = list(prompts[i]) + result.tokens[:b.start]
            if b.drafts:
                _, n = lookup_match(ctx, len(b.drafts), 2, 1)
                want = _lookup_reference(ctx, b.drafts, n)
                assert b.records["lookup_len"].tolist() == want[0]
                np.testing.assert_allclose(b.records["lookup_freq"], want[1], rtol=0, atol=1e-15)
                for j in range(len(b.drafts)):
                    ahead = engine.drafter.lookahead(engine, ctx, j)
                    assert ahead == {"lookup_len": want[0][j], "lookup_freq": pytest.approx(want[1][j])}
                checked += len(b.drafts)
    assert checked == len(df)


def done_again(engine, prompts):
    return engine.run_texts([(i, ids, hv.text_rng(11, i)) for i, ids in enumerate(prompts)], GAMMA, 30, 2)


def test_zero_length_draft_is_a_plain_target_step(llama_files):
    setup = hv.build(harvest_config(llama_files, llama_files["root"] / "unused", ngram=(3, 1)))
    engine = setup.engine
    with torch.inference_mode():
        batch = engine.new_batch(1)
        engine.start(batch, 0, 0, [1, 5, 9, 12], np.random.default_rng(0))  # no repeated token: no match
        res = engine.block(batch, [GAMMA])[0]
    assert res.drafts == [] and res.records is None and len(res.emitted) == 1 and res.accepted == 0
    assert batch.rows[0].ctx == [1, 5, 9, 12] + res.emitted


def test_early_exit_drafts_from_the_first_k_layers(llama_files):
    from transformers import AutoModelForCausalLM, LlamaForCausalLM

    setup = hv.build(harvest_config(llama_files, llama_files["root"] / "unused", exit_layer=2))
    engine = setup.engine
    assert engine.drafter.settings() == {"kind": "early_exit", "exit_layer": 2, "target_layers": 4}
    full = AutoModelForCausalLM.from_pretrained(llama_files["target"])
    import copy

    cfg = copy.deepcopy(full.config)  # the model reads its config's layer count: never change full's
    cfg.num_hidden_layers = 2
    short = LlamaForCausalLM(cfg)
    short.load_state_dict(full.state_dict(), strict=False)
    short.eval()
    prompt = [1, 5, 9, 12, 7]
    with torch.inference_mode():
        batch = engine.new_batch(1)
        engine.start(batch, 0, 0, prompt, np.random.default_rng(4))
        drafts, q, _ = engine.drafter.propose(engine, batch, [3])[0]
        ids = torch.tensor([prompt + drafts[:-1]])
        manual, _ = distributions(short(input_ids=ids).logits[0, len(prompt) - 1:, :engine.vocab], 1.0)
        np.testing.assert_allclose(q, manual, rtol=1e-5, atol=1e-7)
        # the target's cache is back to the context: verification computes the target's own logits
        assert batch.kv.lengths[0] == len(prompt) - 1
        logits = engine.run(batch.kv, [prompt[-1:] + drafts], len(drafts) + 1)
        ref = full(input_ids=torch.tensor([prompt + drafts])).logits[0, len(prompt) - 1:, :engine.vocab]
        np.testing.assert_allclose(logits[0].numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("drafter", [{"ngram": (2, 1)}, {"exit_layer": 2}])
def test_live_greedy_equals_plain_decoding_and_harvest_text(llama_files, drafter):
    from evolve.commands.live import decoder
    from evolve.live.decoding import autoregressive_text

    ids = [1, 5, 9, 5, 9, 12]
    greedy = hv.build(harvest_config(llama_files, llama_files["root"] / "u", temperature=0.0, **drafter)).engine
    plain, _ = autoregressive_text(greedy, ids, 20, hv.text_rng(0, 0))
    spec, counts = decoder(get_rule("standard_rejection")).text(greedy, ids, 20, hv.text_rng(0, 0), gamma=GAMMA)
    assert spec == plain and counts.block_tv < 1e-12
    engine = hv.build(harvest_config(llama_files, llama_files["root"] / "u", **drafter)).engine
    for i in range(3):
        harvested = engine.generate(ids, GAMMA, 20, hv.text_rng(5, i)).tokens
        live, counts = decoder(get_rule("standard_rejection")).text(engine, ids, 20, hv.text_rng(5, i), gamma=GAMMA)
        assert live == harvested and counts.block_tv < 1e-12


def test_cli_ngram_harvest_and_one_drafter_error(llama_files, tmp_path):
    base = ["--target", llama_files["target"], "--prompts", llama_files["prompts"], "--gamma", "2",
            "--max-new-tokens", "6", "--no-progress"]
    code, out = run_harvest(base + ["--draft-exit-layer", "2", "--out", str(tmp_path / "d")])
    assert code == 0, out
    code, out = run_harvest(base + ["--draft-ngram", "2", "--draft-exit-layer", "1", "--out", str(tmp_path / "e")])
    assert code == 2 and "got --draft-ngram and --draft-exit-layer" in out and "choose exactly one drafter" in out
    code, out = run_harvest(base + ["--draft-exit-layer", "4", "--out", str(tmp_path / "f")])
    assert code == 2 and "--draft-exit-layer" in out and "1..3" in out


@pytest.mark.parametrize("drafter", [["--draft-skip-layers", "1"], ["--draft-ngram", "2,1"]])
def test_perf_costs_writes_a_loadable_cost_file(llama_files, tmp_path, drafter):
    from click.testing import CliRunner

    from evolve.cli.perf import perf

    out = tmp_path / "costs.json"
    result = CliRunner().invoke(perf, ["--write-costs", str(out), "--harvest", llama_files["target"], "--harvest-prompts",
                                       llama_files["prompts"], "--gamma-max", "3", "--cost-repeats", "2",
                                       "--threads", "1", *drafter])
    assert result.exit_code == 0, result.output
    costs = load_costs(out)
    assert len(costs.target_forward_s) == 4 and costs.draft_token_s >= 0 and costs.plain_token_s > 0
    assert costs.extra["gamma_max"] == 3 and costs.extra["engine"] == "torch" and costs.extra["threads"] == 1
    assert set(costs.extra["target"]["sha256"]) and costs.extra["machine"]["cpu_count"] >= 1


def test_the_old_spelling_of_perf_write_costs_is_refused(tmp_path):
    """``perf --costs`` (which wrote a cost file, where every other command's ``--costs`` reads one) is refused in one
    line naming ``--write-costs``, and writes nothing."""
    from click.testing import CliRunner

    from evolve.cli.perf import perf

    out = tmp_path / "costs.json"
    result = CliRunner().invoke(perf, ["--costs", str(out)])
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "--write-costs" in lines[0], result.output
    assert not out.exists()
