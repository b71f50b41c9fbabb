"""How a chain block is verified in the simulator: token-wise, block verification or FLy.

The chain decode loop (:func:`evolve.sim.chain.chain_run`) drafts gamma tokens
X_1..X_gamma (q_i, p_i the draft's and the target's distributions at depth i,
r_i = min(1, p_i(X_i)/q_i(X_i))) and draws gamma uniforms u_1..u_gamma; the
verification decides how many drafted tokens it keeps and where the next token
comes from.

``token`` (default)
    The rule's threshold tau_i per token: accept while u_i < tau_i; at the first
    rejection the next token comes from norm(max(0, p - q tau)) (see
    :mod:`evolve.sim.chain`). With the standard rule tau = r this is Leviathan et
    al. 2023 (arXiv 2211.17192).

``block``: block verification
    Ziteng Sun, Uri Mendlovic, Yaniv Leviathan, Asaf Aharoni, Ahmad Beirami,
    Jae Hun Ro, Ananda Theertha Suresh 2024, "Block verification accelerates
    speculative decoding", arXiv 2403.10444. Block weights P_0 = 1, P_i = min(1, P_{i-1} p_i(X_i)/q_i(X_i)); residual
    masses m_i = sum_x max(0, P_i p_{i+1}(x) - q_{i+1}(x)) (i < gamma);
    stopping probabilities h_i = m_i / (m_i + 1 - P_i) (1 when the denominator
    is 0) and h_gamma = P_gamma. With eta_i = u_i, the block keeps X_1..X_tau
    for tau = the largest i with eta_i <= h_i (0 if none), then emits the bonus
    token from p_{gamma+1} if tau = gamma, else a token from
    norm(max(0, P_tau p_{tau+1} - q_{tau+1})). Given the drafted tokens,
    E[tau] = sum_i i h_i prod_{j>i} (1 - h_j). The output is distributed exactly
    as the target's, and the expected accepted length is the largest any valid
    verifier reaches (the paper's optimality result), so it is never below the
    token-wise standard rule's. It replaces the per-token test, so it is defined
    for the standard rule only (a lossy per-token threshold has no block
    counterpart that keeps its damage; we do not invent one).

``block`` with a relaxation (``Verification("block", relaxation=W)``): relaxed block verification
    Block verification as above against the mixture p~_k = (1 - w_k) p_k + w_k q_k
    instead of p_k (the mixture of speculative cascades, Narasimhan et al. 2024,
    arXiv 2405.19261): w_k is the relaxation's expression (a primitive-set
    expression or a constant) over the depth's prefix-level features
    (:data:`evolve.eval.relaxed_block.WEIGHT_FEATURES`; never the drafted
    token's), clamped to [0, 1] (NaN/inf -> 0). Block weights, residual masses
    and the residual use p~; the bonus token after a full block is drawn from
    p. At a fixed context the first emitted token is distributed exactly as
    p~_1, at total variation w_1 (1 - overlap_1) from p_1; the expected damage
    of a block is sum over the emitted depths of w_k (1 - overlap_k)
    (:func:`evolve.verification.block.relaxed_damage`; :mod:`evolve.eval.relaxed_block` scores the
    same from records).

``fly``: FLy
    Jinze Li, Yixing Xu, Guanchen Li et al. 2025, "Training-Free Loosely
    Speculative Decoding: Accepting Semantically Correct Drafts Beyond Exact
    Match", arXiv 2511.22972; vLLM's implementation ``vllm/v1/spec_decode/fly.py``
    and ``docs/features/speculative_decoding/fly.md``. A lossy relaxation of
    the standard test that looks ahead. The native decision at depth i is
    u_i < r_i. A native rejection at depth i is
    overruled (the token is accepted anyway, *deferred*) when all of: the
    target is uncertain there, H_k(p_i) >= theta, where H_k is the entropy in
    nats of the k largest target probabilities (-sum over the top k of
    p log p, not renormalised); p_i(X_i) > 0; at least W drafted tokens follow
    in the block (i + W <= gamma, 1-based); and the next W native decisions all
    accept. The block then keeps the longest prefix of accepted-or-deferred
    tokens; at the first plain rejection the next token comes from the standard
    residual norm(max(0, p - q)); after a full block, the bonus token from p.
    Defaults as vLLM's: W = min(6, gamma - 1), theta = 0.3, k = 3. vLLM applies
    the same decisions by overwriting u_i with 0 before its unchanged rejection
    sampler; the native decisions it checks are on the original uniforms, as
    here. What our simulator assumes: the native test is the standard rule
    (FLy is defined on top of it; another rule is refused), the target's
    distributions are used as they are (vLLM's after temperature/top-k/top-p
    processing), and sampled drafts (the paper's greedy variant compares
    arg maxes instead).

    Damage: a deferred token X_i had q_i(X_i) > p_i(X_i). At a fixed context
    the first emitted token's distribution exceeds p exactly by the deferred
    acceptances at depth 1: out(x) - p(x) = (q(x) - p(x)) g(x) on tokens with
    q > p (g(x) the probability that a rejected x is deferred) and the
    standard residual takes the same mass off the other tokens, so its total
    variation from p equals P(the first drafted token is accepted with
    u >= r), which :func:`evolve.sim.decoding.context_damage` estimates. Given
    the drafted tokens, the expected accepted length and the expected number of
    deferred acceptances follow from a recursion over the pending look-ahead
    (:func:`fly_expected`), the counterparts of the per-token formulas.

The maths of token-wise and block verification is the verification core's (:mod:`evolve.verification`);
this module holds the modes, their parameters and FLy's kernels. Functions are ``@njit(cache=True)``;
arrays are float64 unless said otherwise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from evolve.errors import InputError

VERIFY_TOKEN = 0
VERIFY_BLOCK = 1
VERIFY_FLY = 2
#: Names of the verification modes, indexed by their codes.
VERIFICATIONS: tuple[str, ...] = ("token", "block", "fly")

#: FLy's defaults (vLLM ``fly.md``): window min(FLY_MAX_WINDOW, gamma - 1), entropy threshold (nats), top k.
FLY_MAX_WINDOW = 6
FLY_THRESHOLD = 0.3
FLY_TOP_K = 3


@dataclass(frozen=True)
class Verification:
    """A chain verification mode and its parameters (module doc).

    ``scheme`` is ``token``, ``block`` or ``fly``; ``fly_window`` W (None: the
    default min(6, gamma - 1)), ``fly_threshold`` theta (nats) and ``fly_top_k``
    k apply to ``fly`` only.
    """

    scheme: str = "token"
    fly_window: int | None = None
    fly_threshold: float = FLY_THRESHOLD
    fly_top_k: int = FLY_TOP_K
    #: ``block`` only: the relaxation weight w, an expression over prefix-level features (None: lossless).
    relaxation: str | None = None

    @property
    def code(self) -> int:
        """The kernels' integer code of ``scheme``."""
        return VERIFICATIONS.index(self.scheme)

    def window(self, gamma: int) -> int:
        """FLy's window W for draft length ``gamma`` (the default min(6, gamma - 1) when unset)."""
        return min(FLY_MAX_WINDOW, gamma - 1) if self.fly_window is None else int(self.fly_window)

    def check(self, gamma: int) -> "Verification":
        """Validate against draft length ``gamma``; returns self.

        Raises: InputError naming the value: an unknown kind, FLy with gamma < 2,
        a window outside [0, gamma - 1], a threshold that is negative or not
        finite, a top k below 1.
        """
        if self.scheme not in VERIFICATIONS:
            raise InputError(f"verification: unknown mode {self.scheme!r} (choose from {', '.join(VERIFICATIONS)})")
        if self.relaxation is not None:
            if self.scheme != "block":
                raise InputError(f"verification '{self.scheme}': a relaxation applies to block verification only "
                                 f"(value {self.relaxation!r})")
            self.weight_program()
        if self.scheme != "fly":
            return self
        if gamma < 2:
            raise InputError(f"verification 'fly': needs a draft length gamma >= 2 (value {gamma})")
        w = self.fly_window
        if w is not None and (isinstance(w, bool) or not isinstance(w, (int, np.integer)) or not 0 <= w <= gamma - 1):
            raise InputError(f"verification 'fly': window must be an integer in [0, gamma - 1] = [0, {gamma - 1}] "
                             f"(value {w!r})")
        t = self.fly_threshold
        if isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)) or not math.isfinite(t) \
                or t < 0:
            raise InputError(f"verification 'fly': entropy threshold must be a finite number >= 0 nats (value {t!r})")
        k = self.fly_top_k
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise InputError(f"verification 'fly': top k must be an integer >= 1 (value {k!r})")
        return self

    def weight_program(self):
        """The relaxation's compiled program (:class:`evolve.gp.compiler.Program`), or None without one.

        Raises: InputError for an expression that does not parse or reads a
        feature that depends on the drafted token.
        """
        if self.relaxation is None:
            return None
        from evolve.eval.relaxed_block import check_weight_features
        from evolve.gp.compiler import compile_nodes, parse
        program = compile_nodes(parse(str(self.relaxation), "relaxation"))
        check_weight_features(program.features, "relaxation")
        return program

    def constant_weight(self) -> float | None:
        """The relaxation's value when it reads no feature (``0.3``, ``add(0.5, 0.7)``), unclamped, else None.

        A weight computed from features is clamped to [0, 1] position by position (the rule's semantics,
        as for evolved weights); a constant outside [0, 1] can only be a mistake of whoever gave it, so the
        command line refuses it with this value instead of clamping it silently.
        Raises: InputError as :meth:`weight_program`.
        """
        if self.relaxation is None:
            return None
        from evolve.gp.compiler import evaluate_numpy, parse
        nodes = parse(str(self.relaxation), "relaxation")
        if any(node.node_type == "feature" for node in nodes):
            return None
        with np.errstate(all="ignore"):
            return float(evaluate_numpy(nodes, {}, 1)[0])

    def label(self, gamma: int) -> str:
        """``token``, ``block``, ``block(w=EXPR)`` or ``fly(W=.., theta=.., k=..)``."""
        if self.scheme == "block" and self.relaxation is not None:
            return f"block(w={self.relaxation})"
        if self.scheme != "fly":
            return self.scheme
        return f"fly(W={self.window(gamma)}, theta={self.fly_threshold:g}, k={self.fly_top_k})"


TOKEN = Verification()


# ---------------------------------------------------------------------------------------------
# FLy
# ---------------------------------------------------------------------------------------------

@njit(cache=True)
def topk_entropy(p, k):
    """-sum over the k largest p(v) of p log p, in nats (not renormalised; 0 log 0 = 0)."""
    V = p.shape[0]
    k = min(k, V)
    top = np.partition(p, V - k)[V - k:] if k < V else p
    h = 0.0
    for v in range(top.shape[0]):
        if top[v] > 0.0:
            h -= top[v] * math.log(top[v])
    return h


@njit(cache=True)
def fly_accept(native, gate, gamma, window, deferred):
    """FLy's accepted length given the native decisions (bool (gamma,)) and gates (bool (gamma,)).

    Depth k is kept if native, or deferred: gated and natives k+1..k+W all true
    (a gate is only set where k + W < gamma). ``deferred`` (bool (gamma,)) receives
    which depths were deferred. Returns the number of leading kept depths.
    """
    for k in range(gamma):
        d = False
        if not native[k] and gate[k]:
            d = True
            for j in range(k + 1, k + window + 1):
                if not native[j]:
                    d = False
                    break
        deferred[k] = d
    for k in range(gamma):
        if not (native[k] or deferred[k]):
            return k
    return gamma


@njit(cache=True)
def fly_expected(r, gate, gamma, window, mass, nxt):
    """(E[accepted length], E[deferred acceptances]) of FLy given the drafted tokens.

    ``r`` (gamma,) the native acceptance probabilities, ``gate`` bool (gamma,);
    ``mass``, ``nxt`` scratch (window + 1,). Native decisions are independent
    Bernoulli(r_k). State s = native acceptances still owed to an earlier
    deferral: mass[s] is the probability that depths < k were all kept with s
    owed. Depth k is kept (with everything before it) with probability
    sum_s mass'[s] prod_{j=k+1..k+s} r_j after the step, and a deferral at k
    counts when its window then holds.
    """
    for s in range(window + 1):
        mass[s] = 0.0
    mass[0] = 1.0
    acc = 0.0
    deferrals = 0.0
    for k in range(gamma):
        for s in range(window + 1):
            nxt[s] = 0.0
        nxt[0] += mass[0] * r[k]
        for s in range(1, window + 1):
            nxt[s - 1] += mass[s] * r[k]
        if gate[k]:
            owed = 1.0
            for j in range(k + 1, k + window + 1):
                owed *= r[j]
            deferrals += mass[0] * (1.0 - r[k]) * owed
            nxt[window] += mass[0] * (1.0 - r[k])
        kept = 0.0
        for s in range(window + 1):
            mass[s] = nxt[s]
            if mass[s] > 0.0:  # then k + s < gamma (owed depths lie in the block)
                owed = 1.0
                for j in range(k + 1, k + s + 1):
                    owed *= r[j]
                kept += mass[s] * owed
        acc += kept
    return acc, deferrals


__all__ = ["FLY_MAX_WINDOW", "FLY_THRESHOLD", "FLY_TOP_K", "TOKEN", "VERIFICATIONS", "VERIFY_BLOCK", "VERIFY_FLY",
           "VERIFY_TOKEN", "Verification", "fly_accept", "fly_expected", "topk_entropy"]
