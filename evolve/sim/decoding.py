"""Speculative decoding, simulated for real: the Python side of the chain decode loop.

:func:`simulate_chain` runs chain speculative decoding (:mod:`evolve.sim.chain`)
and the autoregressive baseline on the synthetic models of
:mod:`evolve.sim.models` for several generation lengths; :func:`chain_at_context`
and :func:`chain_traces` run it from a fixed context or record every drafted
token as a schema-valid trace split; :func:`autoregressive` decodes without a
draft.

Cost model: a target call costs 1, a draft step costs c (the cost ratio), so
speculative time = calls * (1 + gamma*c) and autoregressive time = length;
speedup = autoregressive time / speculative time.

Statistics of a run (:class:`ChainResult`)
-----------------------------------------
Over the blocks of a run, with tau_k, r_k = min(1, p(x_k)/q(x_k)) at depth k:

* analytic tokens per call = mean over blocks of 1 + sum_{k=1..gamma}
  prod_{i<=k} tau_i: depth k is reached with probability prod_{i<k} tau_i,
  the per-depth form of Leviathan et al.'s (2023, arXiv 2211.17192) expected
  tokens per call (1 - a^(gamma+1)) / (1 - a) for a constant acceptance a. It
  is evaluated on the tokens actually drafted (including depths past the first
  rejection); given the drafted tokens it is the expected number of tokens the
  block emits, so the simulated tokens per call estimate it without bias;
* tv_expected = sum over blocks of sum_k prod_{i<k} tau_i * max(0, tau_k - r_k)
  divided by the sum over blocks of their analytic tokens: the evaluator's
  ``tv_per_token`` on the simulated blocks (each depth's total-variation damage
  weighted by the probability that the depth is reached, per emitted token);
* tv_empirical = (number of drafted tokens accepted with r_k <= u_k < tau_k)
  divided by the number of emitted tokens: its sampled counterpart. At one
  position P(accept x with r(x) <= u < tau(x)) = sum_x max(0, q(x)tau(x) - p(x))
  = the TV between the rule's output and p, so both estimate the same damage
  per emitted token.

These are token-wise verification's. Block verification and FLy
(:mod:`evolve.sim.verification`, argument ``verification``) run on the same
drafts and uniforms; their analytic tokens per call are the block's expected
tokens given its drafts under that verification (block: 1 + E[tau] from the
stopping probabilities; FLy: 1 + E[kept tokens]); block verification's damage
is 0 (tv_expected = tv_empirical = 0), FLy's tv_expected is its expected number
of deferred acceptances and tv_empirical the realized ones (accepted with
u >= r), per emitted token. :func:`context_damage` measures the damage at
fixed contexts, where it is exactly the first emitted token's TV from p.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from evolve.errors import InputError
from evolve.verification.block import PHI_POINTS
from evolve.verification.tokenwise import standard_threshold
from evolve.eval.costs import DEFAULT_COSTS, Costs
from evolve.gp.primitives import (DERIVED_FEATURES, FEATURES, HISTORY_FEATURES, LEVEL_FEATURES, LOOKUP_FEATURES,
                                  SUFFIX_FEATURES)
from evolve.sim.chain import (
    N_BLOCK_RECORD, N_RECORD, N_STATS, BatchOut, ChainMode, Feature, Programs, Record, RuleProgram, Stat,
    autoregressive_batch, chain_batch,
)
from evolve.sim.models import Context, Jobs, SyntheticModel, context_jobs, random_context, sequence_jobs
from evolve.sim.verification import TOKEN, Verification

#: Largest draft length the simulator accepts.
MAX_GAMMA = 64


def rule_program(rule) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(ops, args, consts, stack_size) of an expression rule, champion or :class:`evolve.gp.compiler.Program`.

    Raises: InputError for a function rule (the simulator runs compiled
    programs inside its jitted loop; give the rule as an expression instead).
    """
    from evolve.gp.compiler import Program
    program = rule if isinstance(rule, Program) else getattr(rule, "program", None)
    if program is None:
        name = getattr(rule, "name", "?")
        raise InputError(f"rule '{name}' is a Python function rule; the simulator runs "
                         "expression rules and champions only (give it as a primitive-set expression)")
    return (np.ascontiguousarray(program.ops, np.int32), np.ascontiguousarray(program.args, np.int32),
            np.ascontiguousarray(program.consts, np.float64), int(program.stack_size))


def check_gamma_range(gamma) -> int:
    """The draft length ``gamma`` as an int after checking that it is an integer in [1, MAX_GAMMA].

    (Unlike :func:`evolve.eval.evaluator.check_gamma`, which checks a gamma against a
    trace split's blocks, this only checks the range the simulator's kernels accept.)
    Raises: InputError naming the parameter ``gamma`` and the value.
    """
    if isinstance(gamma, bool) or not isinstance(gamma, (int, np.integer)) or not 1 <= gamma <= MAX_GAMMA:
        raise InputError(f"must be an integer in [1, {MAX_GAMMA}] (value {gamma!r})", param="gamma")
    return int(gamma)


def is_standard(rule) -> bool:
    """Whether ``rule`` compiles to the standard rule's program min(1, p/q) (any name)."""
    from heuristics.contract import STANDARD_RULE
    return all(np.array_equal(a, b) for a, b in zip(rule_program(rule), rule_program(STANDARD_RULE)))


def check_verification(verification: Verification, rule, gamma: int) -> Verification:
    """``verification`` validated for draft length ``gamma`` and ``rule``; returns it.

    Block verification and FLy replace the standard per-token test, so they
    take the standard rule only (:mod:`evolve.sim.verification`).
    Raises: InputError naming the value (see :meth:`Verification.check`) or the rule.
    """
    if not isinstance(verification, Verification):
        raise InputError(f"verification: expected a Verification (value {verification!r})")
    verification.check(gamma)
    if verification.scheme != "token" and not is_standard(rule):
        raise InputError(f"rule '{getattr(rule, 'name', '?')}': verification '{verification.scheme}' replaces the "
                         "per-token test min(1, p/q) and is defined for the standard rule only (standard_rejection)")
    return verification


_NO_PROGRAM = (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0), 0)


def _chain_args(rule, verification: Verification, gamma: int) -> tuple[ChainMode, Programs]:
    """The chain kernels' :class:`evolve.sim.chain.ChainMode` and :class:`evolve.sim.chain.Programs` (the rule's
    program and the relaxation weight's, empty without a relaxation)."""
    program = verification.weight_program()
    weight = _NO_PROGRAM if program is None else rule_program(program)
    mode = ChainMode(gamma, verification.code, verification.window(gamma) if verification.scheme == "fly" else 0,
                     float(verification.fly_threshold), int(verification.fly_top_k))
    return mode, Programs(RuleProgram(*rule_program(rule)), RuleProgram(*weight))


@dataclass(frozen=True)
class ChainResult:
    """Totals of a chain speculative decoding run over ``sequences`` sequences of ``length`` tokens.

    ``stats`` is float64 (N_STATS,) summed over sequences (columns: :class:`evolve.sim.chain.Stat`);
    ``autoregressive_calls`` the baseline's total target calls; ``per_sequence``
    float64 (sequences, N_STATS) the statistics of each sequence; ``verification`` the mode; ``costs`` the cost
    model of the times (a target call of 1, a draft step of ``draft_token_s``: a cost ratio's,
    :func:`evolve.eval.costs.ratio_costs`).
    """

    length: int
    sequences: int
    gamma: int
    costs: Costs
    stats: np.ndarray
    autoregressive_calls: float
    per_sequence: np.ndarray | None = None
    verification: Verification = TOKEN

    @property
    def target_calls(self) -> float:
        """Mean target calls per sequence."""
        return float(self.stats[Stat.CALLS]) / self.sequences

    @property
    def calls_per_token(self) -> float:
        """Target calls per generated token : total calls / (sequences * length)."""
        return float(self.stats[Stat.CALLS] / self.stats[Stat.LENGTH])

    @property
    def acceptance_rate(self) -> float:
        """Accepted drafted tokens / drafted tokens (gamma per call)."""
        return float(self.stats[Stat.ACCEPTED] / self.stats[Stat.DRAFTED])

    @property
    def tokens_per_call(self) -> float:
        """Emitted tokens / target calls (every block's tokens, the last one not truncated)."""
        return float(self.stats[Stat.EMITTED] / self.stats[Stat.CALLS])

    @property
    def analytic_tokens_per_call(self) -> float:
        """Mean over the simulated blocks of their expected tokens given the drafts (module doc)."""
        return float(self.stats[Stat.ANALYTIC] / self.stats[Stat.CALLS])

    @property
    def speculative_time(self) -> float:
        """Mean simulated time per sequence: calls + c * draft steps (target call = 1, c = ``costs.draft_token_s``)."""
        return float(self.stats[Stat.CALLS] + self.costs.draft_token_s * self.stats[Stat.DRAFT_STEPS]) / self.sequences

    @property
    def autoregressive_time(self) -> float:
        """Mean simulated time per sequence of the baseline: one target call per token."""
        return float(self.autoregressive_calls) / self.sequences

    @property
    def speedup(self) -> float:
        """autoregressive time / speculative time."""
        return self.autoregressive_time / self.speculative_time

    @property
    def tv_expected(self) -> float:
        """Expected damage per emitted token (module doc): sum of block TVs / sum of analytic tokens."""
        return float(self.stats[Stat.TV_EXPECTED] / self.stats[Stat.ANALYTIC])

    @property
    def tv_empirical(self) -> float:
        """Drafted tokens accepted with u >= r per emitted token (module doc)."""
        return float(self.stats[Stat.TV_COUNT] / self.stats[Stat.EMITTED])

    @property
    def expected_acceptance(self) -> float:
        """Mean tau over all drafted tokens."""
        return float(self.stats[Stat.SUM_TAU] / self.stats[Stat.DRAFTED])


def simulate_chain(model: SyntheticModel, rule, lengths, samples: int, gamma: int,
                   costs: Costs = DEFAULT_COSTS, verification: Verification = TOKEN) -> list[ChainResult]:
    """Chain speculative decoding and the autoregressive baseline for every length (module doc).

    Args:
        model: the synthetic models (their seed also seeds the decoding streams).
        rule: expression rule, champion or Program (:func:`rule_program`).
        lengths: generation lengths (ints >= 1); samples: sequences per length (>= 1).
        gamma: draft length; costs: the cost model (a draft step costs ``costs.draft_token_s`` target calls).
        verification: token-wise (default), block verification or FLy
            (:mod:`evolve.sim.verification`; the last two with the standard rule only).

    Returns: one :class:`ChainResult` per length, in order. Sequence i of
    length L starts from its own prompt (key job_key(L, i)), the same for the
    baseline, and the same drafts and uniforms feed every verification mode
    until their outputs differ. Raises InputError for bad options or a function rule.
    """
    gamma = check_gamma_range(gamma)
    check_verification(verification, rule, gamma)
    mode, programs = _chain_args(rule, verification, gamma)
    lengths = [int(x) for x in lengths]
    jobs = sequence_jobs(model, lengths, samples)
    J = jobs["keys"].size
    out = np.zeros((J, N_STATS))
    chain_batch(*model.kernel, model.useed, Jobs(**jobs), mode, *programs,
                BatchOut(out, np.zeros((J, 0), np.int64), np.zeros((J, 0, N_RECORD)), np.zeros((J, 0, N_BLOCK_RECORD))))
    ar = autoregressive_batch(model.kernel, model.useed, Jobs(**jobs), False, np.zeros((J, 0), np.int64))
    results = []
    for i, length in enumerate(lengths):
        sl = slice(i * samples, (i + 1) * samples)
        results.append(ChainResult(length, samples, gamma, costs, out[sl].sum(axis=0), float(ar[sl].sum()),
                                   out[sl].copy(), verification))
    return results


def chain_at_context(model: SyntheticModel, rule, context: Context, n: int, gamma: int, n_tokens: int = 1,
                     seed: int = 0, verification: Verification = TOKEN) -> tuple[np.ndarray, np.ndarray]:
    """``n`` independent speculative decodes of ``n_tokens`` tokens from one fixed context.

    Returns: (tokens int64 (n, n_tokens), first_rows float64 (n, N_RECORD)):
    the emitted tokens, and the record of each decode's first drafted token
    (FEATURES, then r, u, tau, accepted, tested, block, block_residual_mass).
    """
    gamma = check_gamma_range(gamma)
    check_verification(verification, rule, gamma)
    mode, programs = _chain_args(rule, verification, gamma)
    jobs = context_jobs(context, int(n), int(n_tokens))
    tokens = np.zeros((n, n_tokens), dtype=np.int64)
    rows = np.zeros((n, 1, N_RECORD))
    chain_batch(*model.kernel, np.uint64(seed), Jobs(**jobs), mode, *programs,
                BatchOut(np.zeros((n, N_STATS)), tokens, rows, np.zeros((n, 0, N_BLOCK_RECORD))))
    return tokens, rows[:, 0, :]


#: Fixed contexts and decodes per context of :func:`context_damage` (the simulate command's defaults).
DAMAGE_CONTEXTS = 8
DAMAGE_DRAWS = 2000


def context_damage(model: SyntheticModel, rule, gamma: int, verification: Verification = TOKEN,
                   contexts: int = DAMAGE_CONTEXTS, draws: int = DAMAGE_DRAWS, position: int = 12) -> np.ndarray:
    """Empirical damage at fixed contexts: the first emitted token's total variation from p, per context.

    ``contexts`` random contexts (:func:`evolve.sim.models.random_context` keys
    0..contexts-1 at ``position``), ``draws`` one-token decodes from each
    (:func:`chain_at_context`). At a fixed context the first emitted token
    exceeds p exactly on the drafted tokens accepted with u >= r: for a
    per-token rule with the best residual its TV from p is
    sum_x max(0, q(x) tau(x) - p(x)) = P(accept with r <= u < tau); for FLy the
    same holds with the deferred acceptances (:mod:`evolve.sim.verification`).
    So the fraction of decodes whose first drafted token was accepted with
    u >= r estimates the TV without the upward bias of a histogram. Block
    verification is lossless (its output is p; tests check it), so its damage is 0.
    Relaxed block verification emits its first token from p~_1 exactly (tests
    check it), whose TV from p is w_1 (1 - overlap_1): that value of the first
    record is returned, averaged over the draws.

    Returns: float64 (contexts,) the estimated TV at each context.
    Raises: InputError as :func:`chain_at_context`.
    """
    check_verification(verification, rule, check_gamma_range(gamma))
    if verification.scheme == "block" and verification.relaxation is None:
        return np.zeros(int(contexts))
    out = np.empty(int(contexts))
    for c in range(int(contexts)):
        _, rows = chain_at_context(model, rule, random_context(model, key=c, position=position), int(draws), gamma,
                                   seed=c, verification=verification)
        if verification.scheme == "block":
            w = first_weights(verification, rows)
            out[c] = float(np.mean(w * (1.0 - rows[:, Feature.OVERLAP])))
        else:
            out[c] = float(np.mean((rows[:, Record.ACCEPTED] > 0.5) & (rows[:, Record.U] >= rows[:, Record.R])))
    return out


def first_weights(verification: Verification, rows: np.ndarray) -> np.ndarray:
    """The relaxation weights (float64 (R,), clamped to [0, 1], NaN/inf -> 0) of records ``rows`` (R, N_RECORD)."""
    from evolve.eval.reference import eval_rows
    ops, args, consts, ss = rule_program(verification.weight_program())
    X = np.ascontiguousarray(rows[:, :len(FEATURES)].T)
    stack = np.empty((max(ss, 1), X.shape[1]))
    eval_rows(ops, args, consts, X, 0, X.shape[1], stack)
    w = stack[0].copy()
    return np.clip(np.where(np.isfinite(w), w, 0.0), 0.0, 1.0)


def chain_traces(model: SyntheticModel, rule, length: int, sequences: int, gamma: int,
                 key0: int = 0, verification: Verification = TOKEN) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Record a chain decoding run as a schema-valid trace split, plus per-block records.

    Every drafted token (including those after a block's rejection) becomes a
    row as in the vocabulary generator: draft_index 0..gamma-1 consecutive per
    block, rand_value = the u the decode loop drew (a fresh one for untested
    tokens), baseline_accepts = rand_value < min(1, p/q), target_rank and
    block_residual_mass and block_residual_phi (:mod:`evolve.verification.block`, NaN at
    depth gamma - 1).
    So :func:`evolve.eval.evaluator.evaluate` on the frame with ``gamma`` reproduces
    the run's analytic tokens per call and tv_expected (token-wise), and block
    verification's record-level formula reproduces its analytic tokens per call.

    Returns: (frame, tau float64 (n,) the thresholds the loop used, blocks
    float64 (calls, N_BLOCK_RECORD): realized tokens, analytic tokens, TV count, expected TV).
    """
    gamma = check_gamma_range(gamma)
    check_verification(verification, rule, gamma)
    mode, programs = _chain_args(rule, verification, gamma)
    length = int(length)
    jobs = sequence_jobs(model, [length], int(sequences), int(key0))
    J = jobs["keys"].size
    stats = np.zeros((J, N_STATS))
    rows = np.zeros((J, length * gamma, N_RECORD))
    blocks = np.zeros((J, length, N_BLOCK_RECORD))
    chain_batch(*model.kernel, model.useed, Jobs(**jobs), mode, *programs,
                BatchOut(stats, np.zeros((J, 0), np.int64), rows, blocks))
    frames, taus, blocks_all = [], [], []
    for s in range(J):
        n = int(stats[s, Stat.ROWS])
        r = rows[s, :n]
        frame = {f: r[:, i] for i, f in enumerate(FEATURES)
                 if f not in DERIVED_FEATURES + LOOKUP_FEATURES + LEVEL_FEATURES + HISTORY_FEATURES + SUFFIX_FEATURES}
        frame["position"] = frame["position"].astype(np.int64)
        frame["draft_index"] = frame["draft_index"].astype(np.int64)
        frame["target_rank"] = r[:, Feature.TARGET_RANK].astype(np.int64)
        frame["block_residual_mass"] = r[:, Record.RESIDUAL_MASS]
        frame["block_residual_phi"] = list(r[:, Record.PHI:Record.PHI + PHI_POINTS])
        frame["top_token_match"] = frame["top_token_match"] > 0.5
        frame["rand_value"] = r[:, Record.U]
        frame["baseline_accepts"] = r[:, Record.U] < standard_threshold(frame["target_prob"], frame["draft_prob"])
        frame["seq_id"] = np.full(n, s, dtype=np.int64)
        frames.append(pd.DataFrame(frame))
        taus.append(r[:, Record.TAU])
        blocks_all.append(blocks[s, :int(stats[s, Stat.CALLS])])
    return pd.concat(frames, ignore_index=True), np.concatenate(taus), np.concatenate(blocks_all)


def autoregressive(model: SyntheticModel, length: int, sequences: int, greedy: bool = False,
                   key_length: int | None = None) -> np.ndarray:
    """Tokens (int64 (sequences, length)) of plain autoregressive decoding, sequence i from prompt job_key(L, i).

    ``key_length`` (default ``length``) is the L of the prompt keys, so a run of
    another length can share prompts. Greedy decoding emits argmax p.
    """
    jobs = sequence_jobs(model, [int(key_length if key_length is not None else length)], int(sequences))
    jobs["lengths"][:] = int(length)
    out = np.zeros((int(sequences), int(length)), dtype=np.int64)
    autoregressive_batch(model.kernel, model.useed, Jobs(**jobs), bool(greedy), out)
    return out
