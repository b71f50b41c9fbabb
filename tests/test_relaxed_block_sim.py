"""Relaxed block verification in the chain simulator (evolve/sim/verification.py, chain.py).

* exactness: at a fixed context the joint law of the first two emitted tokens is the autoregressive
  law of the mixture p~ = (1 - w) p + w q (chi-square passes) and not the target's (it fails for
  w > 0); the first emitted token's measured total variation from p is the per-position formula
  w (1 - overlap);
* w = 0 is lossless block verification, decode for decode;
* the record-level scorer (evolve/eval/relaxed_block.py) on the simulator's own trace export
  (``block_residual_mass``, ``block_residual_phi``) reproduces the kernel's expected tokens per call
  and damage given the drafts, and the simulated tokens per call and damage;
* relaxations of other modes, of lossy rules and weights that read the drafted token are refused.
"""
from __future__ import annotations

import numpy as np
import pytest

from evolve.errors import InputError
from evolve.traces.io import Traces
from evolve.traces.synth.vocab_model import VocabModelConfig
from evolve.eval.evaluator import EvalData
from evolve.eval.relaxed_block import attach
from evolve.kinds.relaxation.eval_population import evaluate_relaxed
from evolve.sim.chain import B_ANALYTIC, B_TOKENS, B_TV_COUNT, B_TV_EXPECTED
from evolve.sim.decoding import chain_at_context, chain_traces, context_damage, simulate_chain
from evolve.sim.models import Context, SyntheticModel, distributions_at, random_context
from evolve.sim.verification import Verification
from heuristics.registry import get_rule

from helpers import chi_square_pvalue

STANDARD = get_rule("standard_rejection")
V = 5
DRAWS = 100_000


@pytest.fixture(scope="module")
def tiny() -> SyntheticModel:
    """A poor draft over 5 tokens whose q does not depend on the depth (depth_decay 0), so p~ with a w that
    reads only the position's distributions is one autoregressive law, whichever depth a token is drafted at."""
    return SyntheticModel(vocab_size=V, seed=3, config=VocabModelConfig(draft_quality=0.6, depth_decay=0.0))


@pytest.fixture(scope="module")
def sim_model() -> SyntheticModel:
    return SyntheticModel(vocab_size=100, seed=11)


def _mixture(dist: dict, w: float) -> np.ndarray:
    return (1.0 - w) * dist["p"] + w * dist["q"]


def _joint_laws(model: SyntheticModel, ctx: Context, weight) -> tuple[np.ndarray, np.ndarray]:
    """(law of p~, law of p) of the first two emitted tokens, flattened a * V + b; ``weight(dist)`` gives w."""
    dist = distributions_at(model, ctx)
    relaxed, target = np.zeros((V, V)), np.zeros((V, V))
    first = _mixture(dist, weight(dist))
    for a in range(V):
        nxt = distributions_at(model, Context(np.append(ctx.window[1:], a).astype(np.int64), ctx.position + 1,
                                              dist["d"]))
        relaxed[a] = first[a] * _mixture(nxt, weight(nxt))
        target[a] = dist["p"][a] * nxt["p"]
    return relaxed.ravel(), target.ravel()


@pytest.mark.parametrize("relaxation, weight", [("0.3", lambda d: 0.3),
                                                ("mul(0.6, overlap)", lambda d: 0.6 * d["overlap"])])
def test_relaxed_block_emits_the_mixture_law(tiny, relaxation, weight):
    ctx = random_context(tiny, key=2, position=12)
    dist = distributions_at(tiny, ctx)
    np.testing.assert_array_equal(dist["q"], distributions_at(tiny, ctx, depth=2)["q"])  # q free of the depth
    relaxed_law, target_law = _joint_laws(tiny, ctx, weight)
    verification = Verification("block", relaxation=relaxation)
    tokens, _ = chain_at_context(tiny, STANDARD, ctx, DRAWS, gamma=3, n_tokens=2, seed=1, verification=verification)
    counts = np.bincount(tokens[:, 0] * V + tokens[:, 1], minlength=V * V)
    pv, pv_target = chi_square_pvalue(counts, relaxed_law), chi_square_pvalue(counts, target_law)
    # the first emitted token: its distance from p is the formula w (1 - overlap) (the histogram's own noise,
    # about sqrt(V / DRAWS) / 2, is far below the tolerance)
    first = np.bincount(tokens[:, 0], minlength=V) / DRAWS
    tv_measured = 0.5 * np.abs(first - dist["p"]).sum()
    tv_formula = weight(dist) * (1.0 - dist["overlap"])
    print(f"w = {relaxation}: chi-square p-values vs p~ {pv:.3f}, vs p {pv_target:.3g}; first token TV from p "
          f"measured {tv_measured:.4f}, formula {tv_formula:.4f}")
    assert pv > 0.01
    assert pv_target < 1e-6
    assert tv_formula > 0.05 and abs(tv_measured - tv_formula) < 0.006
    assert 0.5 * np.abs(first - _mixture(dist, weight(dist))).sum() < 0.006
    # the simulate command's context damage is that formula, at its contexts (keys 0, 1, ...)
    damage = context_damage(tiny, STANDARD, 3, verification, contexts=2, draws=50, position=12)
    for key in range(2):
        at = distributions_at(tiny, random_context(tiny, key=key, position=12))
        assert damage[key] == pytest.approx(weight(at) * (1.0 - at["overlap"]), rel=1e-12)


def test_zero_weight_is_lossless_block_verification(sim_model):
    lossless = simulate_chain(sim_model, STANDARD, [600], 4, 4, verification=Verification("block"))[0]
    zero = simulate_chain(sim_model, STANDARD, [600], 4, 4, verification=Verification("block", relaxation="0.0"))[0]
    np.testing.assert_array_equal(lossless.stats, zero.stats)
    more = simulate_chain(sim_model, STANDARD, [600], 4, 4, verification=Verification("block", relaxation="0.2"))[0]
    assert more.analytic_tokens_per_call > lossless.analytic_tokens_per_call
    assert more.tv_expected > 0.0 and more.tv_empirical > 0.0


def test_record_scorer_reproduces_the_simulation(sim_model):
    relaxation = "if_gt(draft_index, 0.5, mul(0.2, overlap), 0.5)"
    verification = Verification("block", relaxation=relaxation)
    frame, _, blocks = chain_traces(sim_model, STANDARD, length=1500, sequences=12, gamma=4,
                                    verification=verification)
    traces = Traces.from_frame(frame)  # schema-valid: the phi column is NaN only at each block's last record
    data = EvalData.from_traces(traces)
    attach(data, traces)
    m = evaluate_relaxed([relaxation], data, 4)[0]
    assert m.blocks == len(blocks) > 4000
    analytic = blocks[:, B_ANALYTIC].mean()
    analytic_tv = blocks[:, B_TV_EXPECTED].sum() / blocks[:, B_ANALYTIC].sum()
    realized = blocks[:, B_TOKENS].mean()
    realized_tv = blocks[:, B_TV_COUNT].sum() / blocks[:, B_TOKENS].sum()
    print(f"tokens per call: records {m.tokens_per_call:.5f}, kernel's expectation {analytic:.5f}, simulated "
          f"{realized:.5f}; TV per token: records {m.tv_per_token:.6f}, expected {analytic_tv:.6f}, "
          f"realized {realized_tv:.6f}")
    # given the drafts the records hold everything but the exact phi between grid points
    assert 0.0 <= m.tokens_per_call - analytic < 1e-3
    assert m.tv_per_token == pytest.approx(analytic_tv, rel=2e-3)
    assert abs(realized / analytic - 1.0) < 0.01
    assert abs(realized_tv / analytic_tv - 1.0) < 0.02


def test_relaxations_that_are_not_defined_are_refused(sim_model):
    with pytest.raises(InputError, match="a relaxation applies to block verification only"):
        simulate_chain(sim_model, STANDARD, [10], 1, 3, verification=Verification("token", relaxation="0.1"))
    with pytest.raises(InputError, match="relaxation: reads 'target_prob', which depends on the drafted token"):
        simulate_chain(sim_model, STANDARD, [10], 1, 3,
                       verification=Verification("block", relaxation="mul(0.1, target_prob)"))
    with pytest.raises(InputError, match="standard rule only"):
        simulate_chain(sim_model, get_rule("ratio_floor_0.3"), [10], 1, 3,
                       verification=Verification("block", relaxation="0.1"))
    with pytest.raises(InputError):
        Verification("block", relaxation="mul(0.1,").check(3)
    assert Verification("block", relaxation="0.1").label(3) == "block(w=0.1)"
