"""Live speculative decoding with any rule (`benchmark.py live`) on tiny random Llama models built offline.

The models are built as in test_harvest.py (a random Llama, hidden size 32, and a word-level
tokenizer saved into a temporary directory); nothing is downloaded.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402

from evolve.harvest.config import HarvestConfig  # noqa: E402
from evolve.errors import InputError  # noqa: E402
from evolve.harvest.loop import build, text_rng  # noqa: E402
from evolve.cli.benchmark import cli  # noqa: E402
from evolve.gp.primitives import FEATURES  # noqa: E402
from evolve.commands.live import decoder, resolve_rules, run_live  # noqa: E402
from evolve.report.live import KEYS  # noqa: E402
from evolve.live.decoding import candidate_features, rule_thresholds  # noqa: E402
from heuristics.contract import Rule  # noqa: E402
from heuristics.registry import get_rule  # noqa: E402

WORDS = [f"w{i}" for i in range(29)]
GAMMA = 3
MAX_NEW = 12
#: A rule reading target_rank (computed only for rules that read it): accept the target's top 3.
RANK_RULE = Rule("top3", expression="if_gt(target_rank, 2.5, 0.0, 1.0)")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    root = tmp_path_factory.mktemp("live")
    words = ["<unk>", "<s>", "</s>", *WORDS]
    raw = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.3)
    LlamaForCausalLM(cfg).save_pretrained(root / "target")
    tok.save_pretrained(root / "target")
    rng = np.random.default_rng(3)
    prompts = root / "prompts.txt"
    prompts.write_text("\n".join(" ".join(rng.choice(WORDS, size=rng.integers(1, 6))) for _ in range(3)) + "\n")
    return {"target": str(root / "target"), "prompts": str(prompts)}


def _config(files, **kw) -> HarvestConfig:
    base = dict(target=files["target"], prompts=files["prompts"], gamma=GAMMA, max_new_tokens=MAX_NEW, seed=5)
    base.update(kw)
    return HarvestConfig(**base)


DRAFTERS = {"skip_layers": {"skip_layers": (1, 2)}, "window": {"window": (1, 3)}}


@pytest.mark.parametrize("drafter", list(DRAFTERS))
def test_standard_rule_is_lossless_and_always_accept_is_not(files, drafter):
    rules = resolve_rules(["standard_rejection", "always_accept"]) + [RANK_RULE]
    report = run_live(_config(files, **DRAFTERS[drafter]), rules)
    rows = {r["rule"]: r for r in report.rows}
    assert [r["rule"] for r in report.rows] == ["standard_rejection", "always_accept", "top3"]
    assert abs(rows["standard_rejection"]["tv_per_token"]) < 1e-12
    assert rows["always_accept"]["tv_per_token"] > 0
    for r in report.rows:
        assert set(r) == set(KEYS)
        assert 1.0 <= r["tokens_per_call"] <= GAMMA + 1
        assert r["tokens"] > 0 and r["tokens_per_s"] > 0 and r["ar_tokens_per_s"] > 0
        assert r["speedup"] == pytest.approx(r["tokens_per_s"] / r["ar_tokens_per_s"])
    assert rows["always_accept"]["tokens_per_call"] >= rows["standard_rejection"]["tokens_per_call"]


def test_standard_rule_decodes_the_harvesters_text(files):
    engine = build(_config(files, skip_layers=(1, 2))).engine
    ids = [1, 5, 9, 12]
    for i in range(3):
        harvested = engine.generate(ids, GAMMA, MAX_NEW, text_rng(5, i)).tokens
        live, counts = decoder(get_rule("standard_rejection")).text(engine, ids, MAX_NEW, text_rng(5, i), gamma=GAMMA)
        assert live == harvested
        assert counts.tokens == len(live) and counts.block_tv < 1e-12


def test_candidate_features_match_the_harvesters_records():
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(7), 2), rng.dirichlet(np.ones(7), 2)
    X = candidate_features(p, q, np.array([1.0, 2.0]), np.array([0.5, 0.25]), 10, np.array([[3], [4]]), rank=True)
    row = {f: X[i] for i, f in enumerate(FEATURES)}
    np.testing.assert_array_equal(row["draft_prob"], [q[0, 3], q[1, 4]])
    np.testing.assert_array_equal(row["position"], [10, 11])
    np.testing.assert_array_equal(row["draft_index"], [0, 1])
    np.testing.assert_array_equal(row["target_rank"], [(p[0] > p[0, 3]).sum(), (p[1] > p[1, 4]).sum()])
    np.testing.assert_allclose(row["overlap"], np.minimum(p, q).sum(axis=1))
    tau = rule_thresholds(get_rule("standard_rejection"), X, ())
    np.testing.assert_allclose(tau, np.minimum(1, row["target_prob"] / row["draft_prob"]))


def test_command_json(files, tmp_path):
    out = tmp_path / "live.json"
    result = CliRunner().invoke(cli, ["live", "--target", files["target"], "--draft-skip-layers", "1,2",
                                      "--prompts", files["prompts"], "--rule", "standard_rejection",
                                      "--gamma", "2", "--max-new-tokens", "8", "--output", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())
    assert [list(r) for r in rows] == [list(KEYS)] * 2 and rows[0]["rule"] == "standard_rejection"
    # the engine the torch backend stands for, its own plain decoding beside ours (without --peers)
    assert rows[1]["rule"] == "transformers plain" and rows[1]["engine"] == "transformers"
    assert rows[1]["tokens_per_s"] > 0 and rows[1]["speedup"] == 1.0
    assert 1.0 <= rows[0]["tokens_per_call"] <= 3.0


def test_a_live_run_raises_no_deprecation_warning(files):
    """The forward passes name the cache by the keyword the installed transformers takes (``cache`` from 5.24
    on), so a live run prints no ``past_key_values`` FutureWarning."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = CliRunner().invoke(cli, ["live", "--target", files["target"], "--draft-skip-layers", "1",
                                          "--prompts", files["prompts"], "--rule", "standard_rejection", "--gamma",
                                          "2", "--max-new-tokens", "4", "--format", "json", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert not [w for w in caught if "past_key_values" in str(w.message)]
    assert "past_key_values" not in result.output


def test_command_errors(files):
    base = ["live", "--target", files["target"], "--draft-skip-layers", "1", "--prompts", files["prompts"]]
    none = CliRunner().invoke(cli, base)
    assert none.exit_code == 2 and "give at least one rule" in none.stderr
    unknown = CliRunner().invoke(cli, base + ["--rule", "nope"])
    assert unknown.exit_code == 2 and "unknown rule 'nope'" in unknown.stderr


def test_expected_tokens_and_standard_error(files):
    report = run_live(_config(files, skip_layers=(1, 2)), resolve_rules(["standard_rejection", "always_accept"]))
    rows = {r["rule"]: r for r in report.rows}
    for r in report.rows:
        assert 1.0 <= r["expected_tokens_per_call"] <= GAMMA + 1
        assert 0.0 <= r["tokens_per_call_se"] < 1.0
    # always_accept: tau = 1 for every draft, so a call's expected tokens are its drafts + 1, never fewer
    # than it emitted (an end-of-sequence draft stops a text one token short of that)
    acc = rows["always_accept"]
    assert acc["expected_tokens_per_call"] >= acc["tokens_per_call"] - 1e-12


def _harvest_metadata(root, prompts, splits, **config):
    from evolve.files.digest import sha256_file

    root.mkdir()
    meta = {"generator": "harvest", "splits": splits,
            "config": {"prompts": str(prompts), "prompts_sha256": sha256_file(prompts), **config}}
    (root / "metadata.json").write_text(json.dumps(meta))
    return root


def test_split_prompts_pick_the_datasets_held_out_prompts(files, tmp_path):
    from evolve.harvest.subset import split_prompts

    data = _harvest_metadata(tmp_path / "d", files["prompts"], {"train": [0], "valid": [1], "test": [2]})
    assert split_prompts(files["prompts"], data, "test") == [2]
    report = run_live(_config(files, skip_layers=(1, 2)), resolve_rules(["standard_rejection"]), texts=[2])
    assert "1 prompt, " in report.caption and report.rows[0]["tokens"] <= MAX_NEW
    other = tmp_path / "other.txt"
    other.write_text("w1 w2\nw3\nw4\n")
    with pytest.raises(InputError, match="not the prompts file"):
        split_prompts(other, data, "test")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "metadata.json").write_text(json.dumps({"generator": "vocab"}))
    with pytest.raises(InputError, match="not a harvested dataset"):
        split_prompts(files["prompts"], plain, "test")
    with pytest.raises(InputError, match="has no split 'test'"):
        split_prompts(files["prompts"], _harvest_metadata(tmp_path / "e", files["prompts"], {"train": [0]}), "test")
    with pytest.raises(InputError, match="no prompt with index 7"):
        run_live(_config(files, skip_layers=(1, 2)), resolve_rules(["standard_rejection"]), texts=[7])


def test_command_with_family_member_and_split(files, tmp_path):
    data = _harvest_metadata(tmp_path / "d", files["prompts"], {"train": [0], "valid": [1], "test": [2]})
    out = tmp_path / "live.json"
    result = CliRunner().invoke(cli, ["live", "--target", files["target"], "--draft-window", "1,3",
                                      "--prompts", files["prompts"], "--data", str(data), "--split", "valid",
                                      "--rule", "fuzzy_sd:T=0.2", "--max-new-tokens", "6", "--output", str(out),
                                      "--no-progress"])
    assert result.exit_code == 0, result.output
    rows = [r for r in json.loads(out.read_text()) if r["engine"] == "evolve"]  # ours (then transformers plain)
    assert [r["rule"] for r in rows] == ["fuzzy_sd_0.2"] and rows[0]["tokens"] <= 6


def test_block_verification_is_exactly_lossless():
    """block_decision's output over every draft pair and every stopping cell gives exactly the target's joint
    distribution of the first two tokens (V = 4, two drafts, a later block continuing from p_1 after an
    early stop). The stopping probabilities are recomputed here from the paper's formulas (Sun et al.
    2024): h_1 = m_1 / (m_1 + 1 - P_1), h_2 = P_2, with m_1 = sum_v max(0, P_1 p_1(v) - q_1(v))."""
    from evolve.live.decoding import block_decision

    rng = np.random.default_rng(4)
    V = 4
    p0, q0 = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
    p1, q1 = rng.dirichlet(np.ones(V), V), rng.dirichlet(np.ones(V), V)  # row x1: depth 1 after x1
    p2 = rng.dirichlet(np.ones(V), (V, V))
    joint = np.zeros((V, V))
    for x1 in range(V):
        for x2 in range(V):
            w = q0[x1] * q1[x1, x2]
            P1 = min(1.0, p0[x1] / q0[x1])
            P2 = min(1.0, P1 * p1[x1, x2] / q1[x1, x2])
            m1 = np.maximum(P1 * p1[x1] - q1[x1], 0.0).sum()
            h1 = 1.0 if m1 + 1.0 - P1 <= 0 else m1 / (m1 + 1.0 - P1)
            cells = [(2, h2 := P2, (0.5, P2 / 2)), (1, (1 - h2) * h1, (h1 / 2, (1 + h2) / 2)),
                     (0, (1 - h2) * (1 - h1), ((1 + h1) / 2, (1 + h2) / 2))]
            p = np.stack([p0, p1[x1], p2[x1, x2]])
            q = np.stack([q0, q1[x1]])
            for want, prob, eta in cells:
                if prob <= 0:
                    continue
                n, dist, _ = block_decision(p, q, [x1, x2], np.array(eta))
                assert n == want
                dist = dist / dist.sum()
                if n == 0:
                    joint += w * prob * dist[:, None] * p1  # y1 from the residual, y2 from the next block
                elif n == 1:
                    joint[x1] += w * prob * dist
                else:
                    joint[x1, x2] += w * prob
    np.testing.assert_allclose(joint, p0[:, None] * p1, rtol=0, atol=1e-12)


def test_block_verification_row(files):
    report = run_live(_config(files, skip_layers=(1, 2)), resolve_rules(["standard_rejection", "block_verification"]))
    rows = {r["rule"]: r for r in report.rows}
    assert set(rows) == {"standard_rejection", "block_verification"}
    assert rows["block_verification"]["tv_per_token"] == 0.0
    assert 1.0 <= rows["block_verification"]["expected_tokens_per_call"] <= GAMMA + 1


# --- relaxation champions: relaxed block verification against (1 - w) p + w q -------------------------

#: Relaxation weights (kind relaxation): zero (lossless block verification) and one of prefix-level features.
ZERO_WEIGHT = Rule("w_zero", expression="0.0", kind="relaxation")
OVERLAP_WEIGHT = Rule("w_overlap", expression="if_gt(draft_index, 0.5, mul(0.6, overlap), 0.3)", kind="relaxation")


def test_relaxation_with_zero_weight_is_block_verification_exactly(files):
    """w = 0 reproduces lossless block verification bit for bit: the same texts, calls, expected tokens
    and no damage."""
    from evolve.live.decoding import BLOCK_VERIFICATION

    engine = build(_config(files, skip_layers=(1, 2))).engine
    relaxed = decoder(ZERO_WEIGHT)
    assert relaxed.name == "w_zero" and relaxed.keep is None and relaxed.verify is not BLOCK_VERIFICATION.verify
    ids = [1, 5, 9, 12]
    for i in range(3):
        lossless, c0 = BLOCK_VERIFICATION.text(engine, ids, MAX_NEW, text_rng(5, i), gamma=GAMMA)
        ours, c1 = relaxed.text(engine, ids, MAX_NEW, text_rng(5, i), gamma=GAMMA)
        assert ours == lossless
        assert (c1.tokens, c1.target_calls, c1.tokens_sq) == (c0.tokens, c0.target_calls, c0.tokens_sq)
        assert c1.expected_tokens == c0.expected_tokens and c1.block_tv == c0.block_tv == 0.0


def test_relaxed_block_decision_matches_block_verification_against_the_mixture():
    """relaxed_block_decision = block_decision against p~ = (1 - w) p + w q (p itself for the bonus), with the
    damage E[sum over emitted depths of w_d (1 - overlap_d)] by the recursion of evolve.eval.relaxed_block."""
    from evolve.kinds.relaxation.live import relaxed_block_decision
    from evolve.live.decoding import block_decision

    rng = np.random.default_rng(9)
    k, V = 3, 6
    p, q = rng.dirichlet(np.ones(V), k + 1), rng.dirichlet(np.ones(V), k)
    w = np.array([0.2, 0.0, 0.7])
    drafts, eta = [1, 4, 2], rng.random(k)
    n, dist, expected, damage = relaxed_block_decision(p, q, drafts, eta, w)
    mix = np.concatenate([(1 - w)[:, None] * p[:k] + w[:, None] * q, p[k:]])
    n2, dist2, expected2 = block_decision(mix, q, drafts, eta)
    assert n == n2 and expected == expected2
    np.testing.assert_array_equal(dist, dist2)
    # damage by enumeration over the accepted length: P(tau = j) from the stopping probabilities h
    from evolve.verification.block import block_masses, block_stops
    rows = np.arange(k)
    weights, masses, h = np.empty(k), np.empty(k), np.empty(k)
    block_masses(mix[:k], q, mix[rows, drafts], q[rows, drafts], k, weights, masses)
    block_stops(weights, masses, k, h)
    per = w * (1 - np.minimum(p[:k], q).sum(axis=1))
    prob = [h[j - 1] * np.prod(1 - h[j:]) if j > 0 else np.prod(1 - h) for j in range(k + 1)]
    want = sum(pj * per[:min(j + 1, k)].sum() for j, pj in enumerate(prob))
    assert damage == pytest.approx(want, rel=1e-12, abs=1e-15)
    _, _, _, none = relaxed_block_decision(p, q, drafts, eta, np.zeros(k))
    assert none == 0.0


def test_relaxation_champion_decodes_by_relaxed_block_verification(files, tmp_path):
    """A relaxation champion file runs as relaxed block verification (a row named after it, damage > 0),
    never as a per-token threshold; w = 0 gives block verification's figures."""
    from heuristics.champions import Champion, save_champion

    paths = []
    for rule in (ZERO_WEIGHT, OVERLAP_WEIGHT):
        champ = Champion(name=rule.name, expression=rule.expression, kind="relaxation", objective="pareto",
                         metrics={"train": {"tokens_per_call": 2.0}, "valid": {"tokens_per_call": 2.0}})
        paths.append(save_champion(champ, tmp_path)[0])
    rules = resolve_rules(["block_verification"], paths)
    report = run_live(_config(files, skip_layers=(1, 2)), rules)
    rows = {r["rule"]: r for r in report.rows}
    assert list(rows) == ["block_verification", "w_zero", "w_overlap"]
    for key in ("tokens", "target_calls", "expected_tokens_per_call", "tv_per_token"):
        assert rows["w_zero"][key] == rows["block_verification"][key]
    assert rows["block_verification"]["tv_per_token"] == 0.0
    assert 0.0 < rows["w_overlap"]["tv_per_token"] <= 0.6
    assert 1.0 <= rows["w_overlap"]["expected_tokens_per_call"] <= GAMMA + 1
