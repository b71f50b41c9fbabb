"""Harvester of genuine speculative-decoding traces (the package data/harvest).

Tiny randomly initialised Llama models and a word-level tokenizer are built offline in a
temporary directory; nothing is downloaded.
"""
from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pandas as pd
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("scipy.stats")

from evolve.errors import InputError  # noqa: E402
from evolve.harvest import loop as hv  # noqa: E402
from evolve.cli.drafters import value_type  # noqa: E402
from evolve.cli.types import LAYER_LIST  # noqa: E402

WINDOW = value_type("pair", "SINK,RECENT")  # --draft-window's type
from evolve.traces.io import SPLITS, load_dataset, load_metadata  # noqa: E402

from harvest_helpers import (  # noqa: E402
    GAMMA, MAX_NEW, chi2_pvalue, first_tokens, harvest_config, run_harvest, stop_after, word_tokenizer,
)

#: Tiny models run fastest (and identically) on one thread (the fixture is in conftest.py).
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def datasets(llama_files):
    """One harvest per drafter kind: {kind: (out dir, result)} (about 12 s: its tests are marked slow)."""
    out = {}
    for kind, kw in (("model", {"draft": llama_files["draft"]}), ("skip_layers", {"skip_layers": (1, 2)}),
                     ("window", {"window": (1, 3)})):
        d = llama_files["root"] / f"out-{kind}"
        out[kind] = (d, hv.harvest(harvest_config(llama_files, d, **kw), progress=False))
    return out


def _blocks(df: pd.DataFrame):
    """Yield (seq_id, start position, rows) for each block of one split (rows in file order)."""
    starts = np.flatnonzero(df["draft_index"].to_numpy() == 0)
    ends = np.append(starts[1:], len(df))
    for a, b in zip(starts, ends):
        rows = df.iloc[a:b]
        yield int(rows["seq_id"].iat[0]), int(rows["position"].iat[0]), rows


# ----------------------------------------------------------------------------- datasets


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["model", "skip_layers", "window"])
def test_dataset_is_valid_and_complete(datasets, llama_files, kind):
    out, result = datasets[kind]
    assert result.texts_done == result.texts_total == 10 and not result.interrupted and result.consolidated
    data = load_dataset(out)  # validates every column, dtypes, ranges and baseline_accepts
    meta = load_metadata(out)
    seqs = {}
    for name in SPLITS:
        tr = data[name]
        assert all(tr.has(c) for c in ("draft_index", "draft_top_prob", "target_top_prob", "overlap"))
        assert tr["draft_index"].max() <= GAMMA - 1
        seqs[name] = set(np.unique(tr["seq_id"]).tolist())
        assert seqs[name] == set(meta["splits"][name])
        stats = meta["statistics"][name]
        assert stats["tokens"] == tr.n and stats["texts"] == len(seqs[name])
        assert stats["mean_overlap"] == pytest.approx(float(np.mean(tr["overlap"])))
    assert sum(len(s) for s in seqs.values()) == 10 and not (seqs["train"] & (seqs["valid"] | seqs["test"]))
    assert (len(seqs["train"]), len(seqs["valid"]), len(seqs["test"])) == (8, 1, 1)
    cfg = meta["config"]
    assert meta["generator"] == "harvest" and meta["complete"] and cfg["drafter"]["kind"] == kind
    assert cfg["gamma"] == GAMMA and cfg["temperature"] == 1.0 and meta["seed"] == 11
    weights = os.path.join(llama_files["target"], "model.safetensors")
    assert cfg["target"]["sha256"]["model.safetensors"] == hashlib.sha256(open(weights, "rb").read()).hexdigest()
    assert cfg["prompts_sha256"] == hashlib.sha256(open(llama_files["prompts"], "rb").read()).hexdigest()
    texts = [json.loads(line) for line in open(out / "texts.jsonl")]
    assert [t["seq_id"] for t in texts] == list(range(10)) and texts[4]["line"] == 6  # blank line 5 skipped
    assert all(1 <= t["tokens"] <= MAX_NEW for t in texts)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["model", "skip_layers", "window"])
def test_blocks_follow_the_standard_rule(datasets, kind):
    """Every block records all its drafts (also past the first rejection), and the next block starts
    after the accepted prefix plus one residual/bonus token."""
    out, _ = datasets[kind]
    past_rejection = 0
    for name in SPLITS:
        df = pd.read_parquet(out / f"{name}.parquet")
        prev = None
        for seq, start, rows in _blocks(df):
            acc = rows["baseline_accepts"].to_numpy()
            n = int(np.argmin(acc)) if not acc.all() else len(acc)
            past_rejection += len(acc) - n - 1 if n < len(acc) else 0
            assert (rows["position"].to_numpy() == start + np.arange(len(rows))).all()
            if prev is not None and prev[0] == seq:
                assert start == prev[1] + prev[2] + 1
            else:
                assert start == 0
            prev = (seq, start, n)
    assert past_rejection > 20


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["model", "skip_layers", "window"])
def test_standard_acceptance_agrees_with_overlap(datasets, kind):
    """E[baseline_accepts] = E[min(1, p/q)] = E[overlap] for x ~ q: a drafted token is accepted with
    probability sum_v q(v) min(1, p(v)/q(v)) = sum_v min(p(v), q(v))."""
    out, _ = datasets[kind]
    df = pd.concat([pd.read_parquet(out / f"{s}.parquet") for s in SPLITS])
    ov = df["overlap"].to_numpy()
    r = np.minimum(1.0, df["target_prob"] / df["draft_prob"]).to_numpy()
    n = len(df)
    assert n > 300
    sd_accept = np.sqrt(np.mean(ov * (1 - ov)) / n)
    assert abs(df["baseline_accepts"].mean() - ov.mean()) < 4 * sd_accept
    assert abs(r.mean() - ov.mean()) < 4 * np.std(r) / np.sqrt(n)
    assert 0.05 < ov.mean() < 0.95  # a real draft/target gap, so the checks above have power


def test_cached_block_distributions_match_full_forward_passes(llama_files):
    """draft_prob/target_prob and entropies of every record (all depths, also past a rejection)
    equal those of uncached forward passes over prompt + emitted text + the block's drafts, so
    the KV caches, their cropping after rejections and the logit alignment are right."""
    setup = hv.build(harvest_config(llama_files, llama_files["root"] / "unused", draft=llama_files["draft"]))
    prompt = [7, 12, 3, 9]
    res = setup.engine.generate(prompt, GAMMA, MAX_NEW, np.random.default_rng(5))
    checked = rejected_blocks = 0
    with torch.inference_mode():
        for b in res.blocks:
            ids = torch.tensor([prompt + res.tokens[:b.start] + b.drafts])
            base, k = len(prompt) + b.start - 1, len(b.drafts)
            for model, prob, ent in ((setup.target.model, "target_prob", "target_entropy"),
                                     (setup.draft.model, "draft_prob", "draft_entropy")):
                p, h = hv.distributions(model(input_ids=ids).logits[0, base:base + k], 1.0)
                np.testing.assert_allclose(p[np.arange(k), b.drafts], b.records[prob], rtol=1e-4, atol=1e-7)
                np.testing.assert_allclose(h, b.records[ent], rtol=1e-4, atol=1e-7)
            assert res.tokens[b.start:b.start + b.accepted] == b.drafts[:b.accepted]
            checked += k
            rejected_blocks += b.accepted < k - 1
    assert checked >= 20 and rejected_blocks >= 3


def test_records_carry_block_residual_mass_and_target_rank(llama_files):
    """block_residual_mass (block verification's m_{d+1}, NaN on a block's last record) and target_rank of
    every record equal a brute-force recomputation from uncached forward passes over the block."""
    setup = hv.build(harvest_config(llama_files, llama_files["root"] / "unused", draft=llama_files["draft"]))
    prompt = [7, 12, 3, 9]
    res = setup.engine.generate(prompt, GAMMA, MAX_NEW, np.random.default_rng(5))
    checked = 0
    with torch.inference_mode():
        for b in res.blocks:
            ids = torch.tensor([prompt + res.tokens[:b.start] + b.drafts])
            base, k = len(prompt) + b.start - 1, len(b.drafts)
            p, _ = hv.distributions(setup.target.model(input_ids=ids).logits[0, base:base + k], 1.0)
            q, _ = hv.distributions(setup.draft.model(input_ids=ids).logits[0, base:base + k], 1.0)
            weight = 1.0
            for d, x in enumerate(b.drafts):
                weight = min(1.0, weight * p[d, x] / q[d, x])
                mass = b.records["block_residual_mass"][d]
                if d + 1 < k:
                    brute = np.maximum(0.0, weight * p[d + 1] - q[d + 1]).sum()
                    assert mass == pytest.approx(brute, rel=1e-4, abs=1e-7)
                else:
                    assert np.isnan(mass)
                rank = b.records["target_rank"][d]
                assert np.sum(p[d] > p[d, x] + 1e-6) <= rank <= np.sum(p[d] > p[d, x] - 1e-6)
                checked += 1
    assert checked >= 20


def test_block_records_columns_by_hand():
    p = np.array([[0.5, 0.3, 0.2], [0.2, 0.2, 0.6], [0.1, 0.1, 0.8]])
    q = np.array([[0.25, 0.5, 0.25], [0.5, 0.25, 0.25], [0.3, 0.3, 0.4]])
    rec = hv.block_records(p, q, np.zeros(3), np.zeros(3), [0, 1, 2], np.array([0.1, 0.9, 0.5]))
    # P_1 = min(1, 0.5/0.25) = 1 -> m_1 = sum max(0, p_2 - q_2) = 0.35; P_2 = 0.2/0.25 = 0.8 ->
    # m_2 = sum max(0, 0.8 p_3 - q_3) = 0.24
    np.testing.assert_allclose(rec["block_residual_mass"][:2], [0.35, 0.24])
    assert np.isnan(rec["block_residual_mass"][2])
    assert list(rec["target_rank"]) == [0, 1, 0]  # 0.2 ties with 0.2: one larger token (0.6)
    assert rec["target_rank"].dtype == np.int64


def test_window_drafter_attends_to_sink_and_recent_tokens_only(llama_files):
    """The window drafter's q equals one uncached forward pass whose rows for the verified prefix
    are causal (the target computed them) and whose later rows see only the first SINK and the
    last RECENT positions (the query included)."""
    sink, recent = 2, 3
    setup = hv.build(harvest_config(llama_files, llama_files["root"] / "unused", window=(sink, recent)))
    prompt = [7, 12, 3, 9, 4, 5]
    res = setup.engine.generate(prompt, GAMMA, 24, np.random.default_rng(2))
    checked = 0
    with torch.inference_mode():
        for b in res.blocks:
            ids = prompt + res.tokens[:b.start] + b.drafts
            n, k, L = len(ids), len(b.drafts), len(prompt) + b.start
            i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
            ok = (j <= i) & ((i < L - 1) | (j < sink) | (i - j < recent))
            mask = torch.zeros(1, 1, n, n).masked_fill(~ok, torch.finfo(torch.float32).min)
            logits = setup.target.model(input_ids=torch.tensor([ids]), attention_mask=mask,
                                        position_ids=torch.arange(n)[None]).logits[0, L - 1:L - 1 + k]
            q, h = hv.distributions(logits, 1.0)
            np.testing.assert_allclose(q[np.arange(k), b.drafts], b.records["draft_prob"], rtol=1e-4, atol=1e-7)
            np.testing.assert_allclose(h, b.records["draft_entropy"], rtol=1e-4, atol=1e-7)
            checked += k
    assert checked >= 10


def test_self_drafters_reduce_to_the_target_when_nothing_is_removed(llama_files):
    """Skipping layers that are identities, or a window wider than the text, drafts exactly from p."""
    for kw in ({"target": llama_files["idle"], "skip_layers": (1, 3)}, {"window": (0, 1000)}):
        setup = hv.build(harvest_config(llama_files, llama_files["root"] / "unused", **kw))
        res = setup.engine.generate([4, 5, 6], GAMMA, 20, np.random.default_rng(0))
        recs = pd.concat([pd.DataFrame(b.records) for b in res.blocks])
        np.testing.assert_allclose(recs["draft_prob"], recs["target_prob"], rtol=1e-5)
        assert recs["overlap"].min() > 0.9999 and recs["baseline_accepts"].all()
    setup = hv.build(harvest_config(llama_files, llama_files["root"] / "unused", target=llama_files["idle"], skip_layers=(0,)))
    res = setup.engine.generate([4, 5, 6], GAMMA, 20, np.random.default_rng(0))
    assert pd.concat([pd.DataFrame(b.records) for b in res.blocks])["overlap"].mean() < 0.99


def _gguf_pair(root):
    """The same tiny Llama as a model directory and as a llama.cpp-style GGUF file (float32,
    byte-level BPE vocabulary, Q/K rows permuted as llama.cpp's converter does)."""
    gguf = pytest.importorskip("gguf")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokens = ["<unk>", "<s>", "</s>", *"abcdefghijklmnopqrstuvwxyz", "\u0120"]
    tk = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, [], unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    directory = root / "bpe"
    PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", bos_token="<s>",
                            eos_token="</s>").save_pretrained(directory)
    torch.manual_seed(4)
    cfg = LlamaConfig(vocab_size=len(tokens), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      bos_token_id=1, eos_token_id=2, initializer_range=0.3)
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(directory)
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}

    def permute(w, heads):
        return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    path = root / "bpe.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_block_count(2)
    w.add_context_length(256)
    w.add_embedding_length(32)
    w.add_feed_forward_length(64)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(8)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([3 if t.startswith("<") else 1 for t in tokens])
    w.add_token_scores([0.0] * len(tokens))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    for i in range(2):
        for hf, gg in names.items():
            t = sd[f"model.layers.{i}.{hf}.weight"]
            t = permute(t, 4) if gg == "attn_q" else permute(t, 2) if gg == "attn_k" else t
            w.add_tensor(f"blk.{i}.{gg}.weight", t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, directory


def test_gguf_target_with_its_own_safetensors_copy_as_draft(llama_files, tmp_path):
    """A .gguf target loads through transformers (weights, config, tokenizer): drafting with the
    same weights from a model directory accepts everything."""
    path, directory = _gguf_pair(tmp_path)
    prompts = tmp_path / "p.txt"
    prompts.write_text("abc de\nxyz\nhello world\n")
    out = tmp_path / "out"
    res = hv.harvest(hv.HarvestConfig(target=str(path), draft=str(directory), prompts=str(prompts), gamma=3,
                                      max_new_tokens=12, out=str(out)), progress=False)
    data = load_dataset(out)
    df = pd.concat([data[s].to_frame() for s in SPLITS])
    assert res.texts_done == 3 and df["overlap"].min() > 0.9999 and df["baseline_accepts"].all()
    np.testing.assert_allclose(df["draft_prob"], df["target_prob"], rtol=1e-5)
    meta = load_metadata(out)["config"]
    assert meta["target"]["format"] == "gguf" and list(meta["target"]["sha256"]) == ["bpe.gguf"]
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    code, output = run_harvest(["--target", str(broken), "--draft-window", "1,2", "--prompts", str(prompts),
                         "--out", str(tmp_path / "o2")])
    assert code == 2 and output.startswith("error: option '--target'") and len(output.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- lossless


@pytest.mark.slow
def test_emitted_token_is_distributed_as_the_target(llama_files, monkeypatch):
    """Chi-square: the first emitted token at a fixed context follows p; with a wrong residual
    (resampling from p after a rejection) the same test rejects."""
    setup = hv.build(harvest_config(llama_files, llama_files["root"] / "unused", draft=llama_files["draft"], gamma=1))
    engine = setup.engine
    prompt = [7, 12, 3]
    with torch.inference_mode():
        logits = setup.target.model(input_ids=torch.tensor([prompt])).logits[0, -1:, :engine.vocab]
        p = hv.distributions(logits, 1.0)[0][0]
        q = hv.distributions(setup.draft.model(input_ids=torch.tensor([prompt])).logits[0, -1:, :engine.vocab],
                             1.0)[0][0]
    assert np.minimum(p, q).sum() < 0.7  # the residual matters
    n = 500
    good = first_tokens(engine, prompt, n, seed=1)
    assert chi2_pvalue(good, p) > 1e-3
    monkeypatch.setattr(hv, "standard_residual", lambda p_, q_: p_)
    bad = first_tokens(engine, prompt, n, seed=1)
    assert chi2_pvalue(bad, p) < 1e-6


def test_greedy_temperature_zero(llama_files, tmp_path):
    setup = hv.build(harvest_config(llama_files, tmp_path, draft=llama_files["draft"], temperature=0.0))
    res = setup.engine.generate([4, 5], GAMMA, 12, np.random.default_rng(0))
    recs = pd.concat([pd.DataFrame(b.records) for b in res.blocks])
    assert (recs["draft_prob"] == 1).all() and recs["target_prob"].isin([0.0, 1.0]).all()
    assert (recs["baseline_accepts"] == (recs["target_prob"] == 1)).all()
    with torch.inference_mode():  # greedy text = the target's arg max continuation
        ids = [4, 5]
        for _ in range(len(res.tokens)):
            ids.append(int(setup.target.model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    assert res.tokens == ids[2:]


# ----------------------------------------------------------------------------- resume


@pytest.mark.slow
def test_resume_after_interruption_gives_the_same_dataset(llama_files, datasets, monkeypatch):
    ref_out, _ = datasets["window"]
    out = llama_files["root"] / "resumed"
    cfg = harvest_config(llama_files, out, window=(1, 3))

    first = hv.harvest(cfg, progress=False, on_text_done=stop_after(2))
    assert first.interrupted and first.texts_done == 2 and not first.consolidated
    assert not (out / "train.parquet").exists()

    texts, blocks = [0], [0]
    real_block = hv.SpeculativeEngine.block

    def count_texts(t):
        texts[0] += 1

    def interrupted_block(self, *a, **kw):  # Ctrl-C at the 3rd block after 5 more texts
        if texts[0] >= 5:
            blocks[0] += 1
            if blocks[0] == 3:
                raise KeyboardInterrupt
        return real_block(self, *a, **kw)

    monkeypatch.setattr(hv.SpeculativeEngine, "block", interrupted_block)
    second = hv.harvest(cfg, progress=False, on_text_done=count_texts)
    assert second.interrupted and second.consolidated and second.texts_done == 7
    partial = load_dataset(out)  # Ctrl-C left a valid dataset
    assert load_metadata(out)["complete"] is False
    assert sum(len(np.unique(t["seq_id"])) for t in partial.values()) == second.texts_done

    monkeypatch.setattr(hv.SpeculativeEngine, "block", real_block)
    third = hv.harvest(cfg, progress=False)
    assert not third.interrupted and third.texts_done == 10
    for name in SPLITS:
        pd.testing.assert_frame_equal(pd.read_parquet(out / f"{name}.parquet"),
                                      pd.read_parquet(ref_out / f"{name}.parquet"))
    assert (out / "texts.jsonl").read_text() == (ref_out / "texts.jsonl").read_text()
    assert load_metadata(out)["statistics"] == load_metadata(ref_out)["statistics"]


# ----------------------------------------------------------------------------- errors


def test_cli_writes_a_dataset(llama_files, tmp_path):
    code, output = run_harvest(["--target", llama_files["target"], "--draft-window", "2,4", "--prompts", llama_files["prompts"],
                         "--max-new-tokens", "6", "--gamma", "2", "--out", str(tmp_path / "d"), "--no-progress"])
    assert code == 0, output
    assert output.strip().splitlines()[-1] == str(tmp_path / "d")
    assert "train" in output and load_dataset(tmp_path / "d")["test"].n > 0


@pytest.mark.slow
def test_bad_inputs_give_one_line_errors(llama_files, datasets, tmp_path):
    t, p = llama_files["target"], llama_files["prompts"]
    two = tmp_path / "two.txt"
    two.write_text("w1\nw2\n")
    noweights = tmp_path / "noweights"
    noweights.mkdir()
    (noweights / "config.json").write_text(open(os.path.join(t, "config.json")).read())
    other = tmp_path / "other"
    other.mkdir()
    (other / "metadata.json").write_text(json.dumps({"schema_version": 1, "generator": "vocab"}))
    cases = [
        (["--target", str(tmp_path / "missing"), "--draft-window", "1,2", "--prompts", p], "no such file"),
        (["--target", str(noweights), "--draft-window", "1,2", "--prompts", p], "no weight files"),
        (["--target", t, "--draft", llama_files["other_tok"], "--prompts", p],
         "tokenizer differs from the target's (vocabularies of 32 vs 32 tokens; id 31 is 'w28' vs 'zz')"),
        (["--target", t, "--prompts", p], "choose exactly one drafter"),
        (["--target", t, "--draft", llama_files["draft"], "--draft-window", "1,2", "--prompts", p], "exactly one"),
        (["--target", t, "--draft-skip-layers", "1,x", "--prompts", p], "--draft-skip-layers"),
        (["--target", t, "--draft-skip-layers", "7", "--prompts", p], "layer 7 does not exist"),
        (["--target", t, "--draft-skip-layers", "0-3", "--prompts", p], "keep at least one"),
        (["--target", t, "--draft-window", "5", "--prompts", p], "SINK,RECENT"),
        (["--target", t, "--draft-window", "1,2", "--prompts", p, "--gamma", "0"], "--gamma"),
        (["--target", t, "--draft-window", "1,2", "--prompts", p, "--temperature", "-1"], "--temperature"),
        (["--target", t, "--draft-window", "1,2", "--prompts", p, "--gamma", "two"], "--gamma"),
        (["--target", t, "--draft-window", "1,2", "--prompts", str(tmp_path / "none.txt")], "--prompts"),
        (["--target", t, "--draft-window", "1,2", "--prompts", str(two)], "at least 3"),
        (["--target", t, "--draft-window", "1,2", "--prompts", p, "--out", str(other)], "generator 'vocab'"),
        (["--target", t, "--draft-window", "1,3", "--prompts", p, "--seed", "12", "--gamma", "4",
          "--max-new-tokens", "30",
          "--out", str(datasets["window"][0])], "other settings (seed: 11 then, 12 now)"),
    ]
    for args, needle in cases:
        code, output = run_harvest(args + ([] if "--out" in args else ["--out", str(tmp_path / "o")]) + ["--no-progress"])
        lines = output.strip().splitlines()
        assert code == 2, (args, output)
        assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], (args, output)
        assert "Traceback" not in output


def test_layer_skipping_refuses_other_architectures(llama_files, tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=32, n_embd=32, n_layer=2, n_head=2, n_positions=64)).save_pretrained(
        tmp_path / "gpt2")
    word_tokenizer().save_pretrained(tmp_path / "gpt2")
    code, output = run_harvest(["--target", str(tmp_path / "gpt2"), "--draft-skip-layers", "0",
                         "--prompts", llama_files["prompts"], "--out", str(tmp_path / "o")])
    assert code == 2 and "Llama-like models only" in output and len(output.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- small parts


def test_option_parsers_and_split_rule():
    import click

    assert LAYER_LIST.convert("5, 1,3-4", None, None) == (1, 3, 4, 5)
    assert WINDOW.convert("4,64", None, None) == (4, 64)
    for bad in ("", "a", "3-1", "-2", "1,,2"):
        with pytest.raises(click.BadParameter):
            LAYER_LIST.convert(bad, None, None)
    with pytest.raises(click.BadParameter, match="SINK,RECENT"):
        WINDOW.convert("5", None, None)
    from evolve.harvest.prompts import assign_splits, processing_order

    splits = assign_splits(30, 3)
    assert [len(splits[s]) for s in SPLITS] == [24, 3, 3]
    assert sorted(sum(splits.values(), [])) == list(range(30)) and splits == assign_splits(30, 3)
    order = processing_order(splits)
    assert sorted(order) == list(range(30))
    assert all(set(order[:9]) & set(splits[s]) for s in SPLITS)  # every split early on


def test_residual_and_sampling():
    p = np.array([0.5, 0.3, 0.2, 0.0])
    q = np.array([0.2, 0.5, 0.1, 0.2])
    np.testing.assert_allclose(hv.standard_residual(p, q), [0.75, 0.0, 0.25, 0.0])
    u = np.random.default_rng(0).random(20000)
    draws = np.bincount([hv.sample_index(p, x) for x in u], minlength=4) / u.size
    np.testing.assert_allclose(draws, p, atol=0.015)
    assert hv.sample_index(p, 0.0) == 0 and hv.sample_index(p, 0.9999999) == 2


def test_prompt_encoding_uses_the_chat_template():
    tok = word_tokenizer()
    assert hv.encode_prompt(tok, "w5 w6", "p") == [8, 9]
    tok.chat_template = ("{% for m in messages %}<s> {{ m['content'] }} {% endfor %}"
                         "{% if add_generation_prompt %}w0{% endif %}")
    assert hv.encode_prompt(tok, "w5 w6", "p") == [1, 8, 9, 3]
    # a later turn: the earlier turn and the model's answer as user and assistant messages, then the turn
    assert hv.encode_prompt(tok, "w7", "p", history=[("w5", "w6 w8")]) == [1, 8, 1, 9, 11, 1, 10, 3]
    with pytest.raises(InputError, match="token id 31 is outside the models' 20 logits"):
        hv.encode_prompt(tok, "w28", "p", vocab=20)
