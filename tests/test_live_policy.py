"""Verification-length policies decoding live (`benchmark.py live` with a rule of kind verify-length).

Tiny random Llama models built offline (the ``llama_files`` fixture). The policy decides before each draft step
whether to draft one more token; the drafts are verified by the standard rule.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from evolve.eval.costs import Costs  # noqa: E402
from evolve.eval.evaluator import EvalData  # noqa: E402
from evolve.kinds.verify_length.eval_policy import decision_data  # noqa: E402
from evolve.gp.primitives import FEATURES  # noqa: E402
from evolve.commands.live import decoder, resolve_rules, run_live  # noqa: E402
from evolve.report.live import KEYS  # noqa: E402
from evolve.kinds.verify_length.live import POLICY_AVAILABLE, policy_features  # noqa: E402
from evolve.live.decoding import autoregressive_text  # noqa: E402
from evolve.harvest.config import HarvestConfig  # noqa: E402
from evolve.harvest.loop import build, text_rng  # noqa: E402
from heuristics.contract import Rule  # noqa: E402
from heuristics.registry import get_rule  # noqa: E402

GAMMA = 3
MAX_NEW = 12


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    yield


@pytest.fixture(scope="module")
def files(llama_files):
    return llama_files

DRAFTERS = {"skip_layers": {"skip_layers": (1, 2)}, "ngram": {"ngram": (2, 1)}, "early_exit": {"exit_layer": 2}}
PROMPT = [1, 5, 9, 12, 5, 9]


def _engine(files, drafter):
    return build(HarvestConfig(target=files["target"], prompts=files["prompts"], gamma=GAMMA, max_new_tokens=MAX_NEW,
                               seed=5, **DRAFTERS[drafter])).engine


@pytest.mark.parametrize("drafter", list(DRAFTERS))
def test_drafting_nothing_is_plain_decoding(files, drafter):
    engine = _engine(files, drafter)
    for i in range(3):
        plain, _ = autoregressive_text(engine, PROMPT, MAX_NEW, text_rng(5, i))
        text, counts = decoder(get_rule("fixed_gamma:0")).text(engine, PROMPT, MAX_NEW, text_rng(5, i), gamma=GAMMA)
        assert text == plain
        assert counts.drafted == {0: counts.target_calls} and counts.tokens == len(plain)


@pytest.mark.parametrize("drafter", list(DRAFTERS))
def test_a_fixed_length_policy_is_the_standard_rule_at_that_gamma(files, drafter):
    engine = _engine(files, drafter)
    for g in (1, GAMMA):
        for i in range(3):
            want, wc = decoder(get_rule("standard_rejection")).text(engine, PROMPT, MAX_NEW, text_rng(5, i), gamma=g)
            got, gc = decoder(get_rule(f"fixed_gamma:{g}")).text(engine, PROMPT, MAX_NEW, text_rng(5, i), gamma=GAMMA)
            assert got == want
            assert (gc.target_calls, gc.drafted, gc.tokens) == (wc.target_calls, wc.drafted, wc.tokens)
            assert max(gc.drafted) <= g


def test_a_confidence_policy_drafts_less_and_stays_lossless(files):
    config = HarvestConfig(target=files["target"], prompts=files["prompts"], gamma=GAMMA, max_new_tokens=MAX_NEW,
                           seed=5, skip_layers=(1, 2))
    rules = resolve_rules(["standard_rejection", "confidence_threshold:h=0.2", "confidence_threshold:h=1"])
    assert rules[1].keep is not None and rules[0].keep is None  # a policy decides before each draft step
    report = run_live(config, rules)
    rows = {r["rule"]: r for r in report.rows}
    assert set(report.rows[1]) == set(KEYS)
    assert rows["standard_rejection"]["mean_drafted"] > rows["confidence_threshold:h=0.2"]["mean_drafted"] > 0
    assert rows["confidence_threshold:h=1"]["mean_drafted"] == 0.0  # top probability 1 > h never holds
    assert all(abs(r["tv_per_token"]) < 1e-12 for r in report.rows)


def test_predicted_seconds_count_every_call_by_its_drafted_tokens(files):
    engine = _engine(files, "skip_layers")
    _, counts = decoder(get_rule("confidence_threshold:h=0.2")).text(engine, PROMPT, MAX_NEW, text_rng(5, 0), gamma=GAMMA)
    costs = Costs(target_forward_s=(1.0, 1.5, 2.0, 4.0), draft_token_s=0.25, plain_token_s=0.5)
    want = sum(n * ((0.5, 1.5, 2.0, 4.0)[k] + 0.25 * k) for k, n in counts.drafted.items())  # no draft: plain step
    assert counts.predicted_seconds(costs) == pytest.approx(want)
    assert sum(counts.drafted.values()) == counts.target_calls


def test_live_decision_features_are_those_of_the_records():
    """policy_features after j drafts equals row j of decision_data for the same block of records."""
    rng = np.random.default_rng(0)
    q, top, ent = rng.uniform(0.05, 0.9, 4), rng.uniform(0.9, 1.0, 4), rng.uniform(0.0, 3.0, 4)
    rows = {"draft_prob": q, "draft_top_prob": top, "draft_entropy": ent, "draft_index": np.arange(4.0),
            "position": 7.0 + np.arange(4), "target_prob": rng.uniform(size=4), "target_entropy": np.ones(4),
            "top_token_match": np.zeros(4), "lookup_len": np.full(4, 2.0), "lookup_freq": rng.uniform(0.1, 1.0, 4)}
    available = tuple(f for f in FEATURES if f in rows)
    X = np.stack([rows[f] for f in available])
    r = np.minimum(1.0, rows["target_prob"] / q)
    u = rng.uniform(size=4)
    data = EvalData(np.ascontiguousarray(X), r, u, u < r, available)
    dd = decision_data(data)
    for j in range(4):
        ahead = {"lookup_len": 2.0, "lookup_freq": rows["lookup_freq"][j]}  # token j's, known before drafting it
        live = policy_features(list(q[:j]), list(top[:j]), list(ent[:j]), 7, ahead)
        for f in ("draft_prob", "draft_top_prob", "draft_entropy", "draft_cumprob", "draft_index", "position",
                  "lookup_len", "lookup_freq"):
            assert live[POLICY_AVAILABLE.index(f), 0] == pytest.approx(dd.feature(f)[j]), (f, j)
    assert np.isnan(policy_features([], [], [], 7)[POLICY_AVAILABLE.index("lookup_freq"), 0])  # a model drafter


def test_a_lookup_policy_decides_on_the_match_and_stays_lossless(files):
    """A policy reading prompt lookup's columns: greedy decoding still equals plain decoding, and a threshold on
    lookup_freq above 1 drafts nothing while one at 0 drafts as the fixed length does."""
    greedy = build(HarvestConfig(target=files["target"], prompts=files["prompts"], gamma=GAMMA,
                                 max_new_tokens=MAX_NEW, seed=5, temperature=0.0, ngram=(2, 1))).engine
    plain, _ = autoregressive_text(greedy, PROMPT, MAX_NEW, text_rng(5, 0))
    never = Rule("n", expression="sub(lookup_freq, 1.5)", kind="verify-length")
    always = Rule("a", expression=f"sub({GAMMA - 0.5!r}, add(draft_index, sub(1.0, lookup_len)))",
                  kind="verify-length")
    fixed = get_rule(f"fixed_gamma:{GAMMA}")
    calls = {}
    for name, policy in (("never", never), ("always", always), ("fixed", fixed)):
        text, counts = decoder(policy).text(greedy, PROMPT, MAX_NEW, text_rng(5, 0), gamma=GAMMA)
        assert text == plain, name
        calls[name] = counts.drafted
    assert calls["never"] == {0: sum(calls["never"].values())}
    assert calls["always"] == calls["fixed"] and sum(k * v for k, v in calls["fixed"].items()) > 0


def test_a_fixed_length_policy_verified_by_block_verification_is_block_verification(files):
    from evolve.live.decoding import BLOCK_VERIFICATION
    from heuristics.contract import Rule

    engine = _engine(files, "skip_layers")
    policy = Rule("g", expression=f"sub({GAMMA - 0.5!r}, draft_index)", kind="verify-length",
                  settings=(("verify_with", "block_verification"),))
    decoded = decoder(policy)
    assert decoded.verify is BLOCK_VERIFICATION.verify
    for i in range(3):
        want, wc = BLOCK_VERIFICATION.text(engine, PROMPT, MAX_NEW, text_rng(5, i), gamma=GAMMA)
        got, gc = decoded.text(engine, PROMPT, MAX_NEW, text_rng(5, i), gamma=GAMMA)
        assert got == want and (gc.target_calls, gc.drafted) == (wc.target_calls, wc.drafted)


def test_a_lookup_policy_is_refused_without_prompt_lookup(files):
    from evolve.errors import InputError
    config = HarvestConfig(target=files["target"], prompts=files["prompts"], gamma=GAMMA, max_new_tokens=MAX_NEW,
                           seed=5, skip_layers=(1, 2))
    policy = decoder(Rule("n", expression="sub(lookup_freq, 0.5)", kind="verify-length"))
    with pytest.raises(InputError, match="reads 'lookup_freq', which only the prompt-lookup drafter gives") as err:
        run_live(config, [policy])
    assert err.value.param == "ngram"
