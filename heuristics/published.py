"""Published acceptance rules as parameterised families (plain data: :data:`FAMILIES`).

Every family is a function of its parameter returning a
:class:`heuristics.contract.Rule` whose expression is written over the primitive
set, so it runs through the same fused interpreter as evolved programs. With
p = ``target_prob`` = p(x), q = ``draft_prob`` = q(x) for the drafted token x,
s = min(1, p/q) (the standard rule) and u ~ U[0, 1) (accept iff u < tau):

* ``standard`` (the family's one point): s, lossless (Leviathan, Kalman, Matias
  2023, arXiv 2211.17192; Chen et al. 2023, arXiv 2302.01318).
* ``greedy_match``: keep the drafted token iff it is the target's most likely
  token, tau = 1 if x = argmax_v p(v) else 0; needs ``target_top_prob``. This is
  the verification of blockwise parallel decoding (Stern, Shazeer, Uszkoreit
  2018, arXiv 1811.03115); its output equals greedy decoding of the target.
* ``typical_acceptance`` (parameter eps): keep x iff the target gives it more
  than a threshold that shrinks with the target's entropy H(p) (nats):
  tau = 1 if p(x) > min(eps, delta*exp(-H(p))) else 0, with delta = sqrt(eps)
  (Medusa's typical acceptance: Cai, Li, Geng, Peng, Lee, Chen, Dao 2024, arXiv 2401.10774).
* ``ears_A`` (parameter alpha = A): the standard ratio plus a tolerance that
  grows with the target's uncertainty 1 - max_v p(v):
  tau = min(1, p/q + A*(1 - max_v p(v))); needs ``target_top_prob`` (EARS,
  efficient adaptive rejection sampling: Sun, Mao, Xu, Chen 2025, arXiv 2512.13194).
* ``fuzzy_sd_T`` (parameter T): accept outright when the two distributions
  are close, tau = 1 if the total-variation distance TV(p, q) = 1 - overlap
  is below T, else s; needs ``overlap`` (fuzzy speculative decoding: Holsman,
  Huang, Dhingra 2025, ACL Findings, arXiv 2502.20704).
* ``lenient_L`` (parameter L in (0, 1]): the standard ratio with the draft
  probability scaled down by a lenience factor, tau = min(1, p/(L*q)) (the
  lenience relaxation discussed by Leviathan, Kalman, Matias 2023, arXiv 2211.17192).

Defaults (the registered rules): typical acceptance eps = 0.09, delta = 0.3
(Medusa's setting; 0.3 = sqrt(0.09), the tie used for the sweep); EARS A = 0.1,
fuzzy SD T = 0.1 and lenient L = 0.5 are this project's picks (the papers tune
these knobs per task; the comparison sweeps each family's whole grid anyway).

Exact ties in greedy match: the drafted token counts as the argmax when
p(x) > max_v p(v) - 1e-12. When x is an argmax the two columns hold the same
float, so the test is exact; the 1e-12 slack only absorbs rounding in datasets
where p(x) and max_v p(v) were computed separately (e.g. harvested traces), and
accepts a token tied with the top within 1e-12, which any tie-break may pick.

Fuzzy SD uses the total-variation distance 1 - overlap (the ``overlap`` column,
sum_v min(p(v), q(v))) as its divergence; the paper also uses KL and JS
divergences, which need whole distributions the traces do not keep.

The relaxed rules inference engines ship follow in :data:`FAMILIES`
(defined in :mod:`heuristics.shipped`): ``sglang_threshold`` (SGLang's two
acceptance thresholds, parameters t_single and t_acc), ``trt_relaxed``
(TensorRT-LLM's relaxed acceptance, parameters N and delta; needs
``target_rank`` and ``target_top_prob``) and ``mixture`` (verification against
(1 - w) q + w p, parameter w). A two-parameter family sweeps a grid of
:class:`Pair` values.

Every family has a parameter sweep grid (:data:`FAMILIES`, used by
``benchmark.py pareto``); rules that need an optional column declare it through
:attr:`Rule.columns_needed` and are skipped, with a note, on datasets without it.
This module only defines data; :mod:`heuristics.registry` registers the default
rule of every family (:data:`PUBLISHED`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from heuristics import shipped
from heuristics.contract import STANDARD, STANDARD_RULE, STANDARD_SOURCE, Rule

LEVIATHAN = STANDARD_SOURCE
MEDUSA = "Medusa typical acceptance, Cai et al. 2024 (arXiv 2401.10774)"
EARS = "EARS, Sun, Chen, Xu 2025 (arXiv 2512.13194)"
FUZZY = "Fuzzy speculative decoding, Holsman et al., ACL Findings 2025 (arXiv 2502.20704)"
GREEDY = "greedy verification of blockwise parallel decoding, Stern et al. 2018 (arXiv 1811.03115)"
LENIENT = "lenience relaxation of the standard rule, Leviathan et al. 2023 (arXiv 2211.17192)"

#: Slack of the greedy-match tie test (see the module doc).
ARGMAX_SLACK = 1e-12

DEFAULT_TYPICAL_EPS = 0.09
DEFAULT_EARS_ALPHA = 0.1
DEFAULT_FUZZY_T = 0.1
DEFAULT_LENIENCE = 0.5


def _check(name: str, value: float, low: float, high: float, low_open: bool = False) -> float:
    """``value`` as a float after checking low <(=) value <= high. Raises ValueError otherwise."""
    v = float(value)
    if not math.isfinite(v) or v > high or v < low or (low_open and v == low):
        bracket = "(" if low_open else "["
        raise ValueError(f"{name} must be in {bracket}{low:g}, {high:g}] (value {value!r})")
    return v


def standard() -> Rule:
    """The standard rule min(1, p/q) (lossless; Leviathan et al. 2023, Chen et al. 2023).

    The same rule object as the registry's ``standard_rejection``
    (:data:`heuristics.contract.STANDARD_RULE`).
    """
    return STANDARD_RULE


def greedy_match() -> Rule:
    """Greedy match: tau = 1 if the drafted token is the target's argmax, else 0 (arXiv 1811.03115).

    Expression: ``if_gt(target_prob, sub(target_top_prob, 1e-12), 1.0, 0.0)``
    (ties: see the module doc). Lossless only for greedy decoding, not for
    sampling. Needs the ``target_top_prob`` column.
    """
    return Rule("greedy_match", "1 if x = argmax p (p(x) > max p - 1e-12) else 0", GREEDY,
                expression=f"if_gt(target_prob, sub(target_top_prob, {ARGMAX_SLACK!r}), 1.0, 0.0)")


def typical_acceptance(eps: float = DEFAULT_TYPICAL_EPS, delta: float | None = None) -> Rule:
    """Medusa's typical acceptance: tau = 1 if p(x) > min(eps, delta*exp(-H(p))) else 0 (arXiv 2401.10774).

    Args:
        eps: hard threshold, in (0, 1]; default 0.09 (Cai et al. 2024).
        delta: entropy-scaled threshold factor, > 0; default sqrt(eps)
            (0.3 for eps = 0.09, Medusa's setting).

    H(p) is ``target_entropy`` in nats. Not lossless. Raises ValueError for
    parameters out of range.
    """
    eps = _check("eps", eps, 0.0, 1.0, low_open=True)
    delta = math.sqrt(eps) if delta is None else _check("delta", delta, 0.0, math.inf, low_open=True)
    default = eps == DEFAULT_TYPICAL_EPS and math.isclose(delta, 0.3)
    name = "typical_acceptance" if default else f"typical_acceptance_{eps:g}_{delta:g}"
    return Rule(name, f"1 if p(x) > min({eps:g}, {delta:g}*exp(-H(p))) else 0", MEDUSA,
                expression=f"if_gt(target_prob, min({eps!r}, mul({delta!r}, exp(mul(-1.0, target_entropy)))),"
                           " 1.0, 0.0)")


def ears(alpha: float = DEFAULT_EARS_ALPHA) -> Rule:
    """EARS: tau = min(1, p/q + alpha*(1 - max_v p(v))) (Sun et al. 2025, arXiv 2512.13194).

    Args: alpha >= 0, the tolerance per unit of target uncertainty 1 - max p
    (0 gives the standard rule). Needs ``target_top_prob``. Lossless iff alpha = 0.
    Raises ValueError for a negative or non-finite alpha.
    """
    alpha = _check("alpha", alpha, 0.0, math.inf)
    return Rule(f"ears_{alpha:g}", f"min(1, p/q + {alpha:g}*(1 - max p))", EARS,
                expression=f"min(1.0, add(div(target_prob, draft_prob), mul({alpha!r}, sub(1.0, target_top_prob))))",
                lossless=alpha == 0.0)


def fuzzy_sd(threshold: float = DEFAULT_FUZZY_T) -> Rule:
    """Fuzzy speculative decoding (arXiv 2502.20704): accept outright iff TV(p, q) = 1 - overlap < T, else standard.

    Args: threshold T in [0, 1] (0 gives the standard rule: TV is never < 0).
    Needs ``overlap``. Lossless iff T = 0. Raises ValueError for T out of range.
    """
    t = _check("threshold", threshold, 0.0, 1.0)
    return Rule(f"fuzzy_sd_{t:g}", f"1 if 1 - overlap < {t:g} else min(1, p/q)", FUZZY,
                expression=f"if_gt({t!r}, sub(1.0, overlap), 1.0, {STANDARD})", lossless=t == 0.0)


def lenient(lenience: float = DEFAULT_LENIENCE) -> Rule:
    """Lenient ratio: tau = min(1, p/(L*q)) with 0 < L <= 1 (L = 1 is the standard rule; arXiv 2211.17192).

    Lossless iff L = 1. Raises ValueError for L out of (0, 1].
    """
    lv = _check("lenience", lenience, 0.0, 1.0, low_open=True)
    return Rule(f"lenient_{lv:g}", f"min(1, p/({lv:g}*q))", LENIENT,
                expression=f"min(1.0, div(target_prob, mul({lv!r}, draft_prob)))", lossless=lv == 1.0)


class Pair(tuple):
    """The two parameter values of one member of a two-parameter family, e.g. ``Pair(0.5, 0.8)``.

    A tuple of two floats that formats element-wise, so that tables print it like a
    number: ``format(Pair(0.5, 0.8), "g") == "(0.5, 0.8)"``. Pairs order
    lexicographically.
    """

    def __new__(cls, first: float, second: float) -> "Pair":
        return super().__new__(cls, (float(first), float(second)))

    def __format__(self, spec: str) -> str:
        return f"({format(self[0], spec)}, {format(self[1], spec)})"

    def __getnewargs__(self) -> tuple[float, float]:  # copy and pickle call __new__ with these
        return self[0], self[1]


@dataclass(frozen=True)
class Family:
    """A published rule family and its parameter sweep.

    Attributes:
        name: curve name in ``benchmark.py pareto`` (e.g. ``fuzzy_sd``).
        make: parameter -> Rule (ignores the parameter for families without one;
            a :class:`Pair` for a two-parameter family).
        parameter: the parameter's name (``"t_single, t_acc"`` for two), or None (a single rule).
        default: the paper's (or project's) default value, or None.
        grid: parameter values swept, ascending (one None for a single rule).
        source: citation.
        columns: optional schema columns the family reads.
    """

    name: str
    make: Callable[[float | Pair | None], Rule]
    parameter: str | None
    default: float | Pair | None
    grid: tuple
    source: str
    columns: tuple[str, ...] = ()

    def rules(self) -> list[tuple[float | Pair | None, Rule]]:
        """(parameter value, rule) for every grid point, in grid order."""
        return [(v, self.make(v)) for v in self.grid]

    def default_rule(self) -> Rule:
        """The family's rule at its default parameter."""
        return self.make(self.default)

    def label(self, value: float | Pair | None) -> str:
        """A grid point's label: ``eps=0.09``, ``t_single=0.5,t_acc=0.8``, or the family name (no parameter)."""
        if value is None or self.parameter is None:
            return self.name
        if isinstance(value, tuple):
            return ",".join(f"{n.strip()}={v:g}" for n, v in zip(self.parameter.split(","), value))
        return f"{self.parameter}={value:g}"


def _grid(values) -> tuple[float, ...]:
    return tuple(sorted({float(round(v, 6)) for v in values}))


def _pairs(first, second, keep=lambda a, b: True) -> tuple[Pair, ...]:
    return tuple(sorted({Pair(round(a, 6), round(b, 6)) for a in first for b in second if keep(a, b)}))


#: Sweep grids: dense enough that a family's best point under a TV budget is found to
#: about 0.1% in tokens per call on the default data (neighbouring grid points differ by
#: less than 0.002 in TV per token below 0.05).
TYPICAL_GRID = _grid(np.geomspace(1e-4, 1.0, 61))
EARS_GRID = _grid(np.concatenate([np.linspace(0.0, 0.3, 121), np.linspace(0.3, 1.0, 36), [1.5, 2.0, 3.0]]))
FUZZY_GRID = _grid(np.concatenate([np.linspace(0.0, 0.4, 161), np.linspace(0.4, 1.0, 31)]))
LENIENT_GRID = _grid(np.concatenate([np.linspace(0.2, 0.8, 61), np.linspace(0.8, 1.0, 81)]))
#: SGLang: t_single in 0.05, 0.1, ..., 1 times t_acc in 0.2 ... 1 (both knobs' lossless end, 1, included).
SGLANG_GRID = _pairs(np.linspace(0.05, 1.0, 20), (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0))
#: TensorRT-LLM: N (relaxed_topk) times delta (relaxed_delta); with N = 1 delta changes nothing, so only 0.
TRT_GRID = _pairs((1, 2, 3, 4, 5, 6, 8, 10, 16, 32),
                  (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0),
                  keep=lambda n, d: n > 1 or d == 0.0)
MIXTURE_GRID = _grid(np.concatenate([np.linspace(0.0, 0.8, 41), np.linspace(0.8, 1.0, 81)]))

FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("standard", lambda _=None: standard(), None, None, (None,), LEVIATHAN),
    Family("greedy_match", lambda _=None: greedy_match(), None, None, (None,), GREEDY, ("target_top_prob",)),
    Family("typical_acceptance", typical_acceptance, "eps", DEFAULT_TYPICAL_EPS, TYPICAL_GRID, MEDUSA),
    Family("ears", ears, "alpha", DEFAULT_EARS_ALPHA, EARS_GRID, EARS, ("target_top_prob",)),
    Family("fuzzy_sd", fuzzy_sd, "T", DEFAULT_FUZZY_T, FUZZY_GRID, FUZZY, ("overlap",)),
    Family("lenient", lenient, "L", DEFAULT_LENIENCE, LENIENT_GRID, LENIENT),
    Family("sglang_threshold", lambda v: shipped.sglang_threshold(*v), "t_single, t_acc",
           Pair(*shipped.DEFAULT_SGLANG), SGLANG_GRID, shipped.SGLANG),
    Family("trt_relaxed", lambda v: shipped.trt_relaxed(*v), "N, delta", Pair(*shipped.DEFAULT_TRT), TRT_GRID,
           shipped.TRT, ("target_rank", "target_top_prob")),
    Family("mixture", shipped.mixture, "w", shipped.DEFAULT_MIXTURE_W, MIXTURE_GRID, shipped.MIXTURE),
)}

#: The default rule of every published family but ``standard`` (whose rule is the baseline
#: ``standard_rejection``), in family order: what :mod:`heuristics.registry` registers.
PUBLISHED: tuple[Rule, ...] = tuple(f.default_rule() for f in FAMILIES.values() if f.name != "standard")

__all__ = ["Family", "Pair", "FAMILIES", "PUBLISHED", "standard", "greedy_match", "typical_acceptance", "ears",
           "fuzzy_sd", "lenient", "ARGMAX_SLACK"]
