"""Scoring acceptance rules and evolved programs over a trace split.

Metrics (for the definitions of acceptance and total variation see Leviathan
et al. 2023, arXiv 2211.17192):

* sampled metrics, with the record's own ``rand_value`` u (accept iff u < tau):
  acceptance_rate A, accuracy (agreement with ``baseline_accepts``), false accepts
  FA (accepted, baseline rejected), false rejects FR, and the
  acceptance-quality fitness (:class:`AcceptanceQualityFitness`): quality =
  max(0, 1 - w_fa*FA/N - w_fr*FR/N), fitness = A*quality if quality >= floor
  else scale*quality (defaults w_fa=10, w_fr=0.1, floor=0.95, scale=0.5);
* expected metrics, free of sampling noise, with tau clamped to [0, 1] and
  r = min(1, p/q): expected_acceptance = mean(tau), expected_tv =
  mean(max(0, tau - r)) (an unbiased estimate of the total-variation distance
  between the rule's output and p, i.e. the rule's damage), expected_false_reject
  = mean(max(0, r - tau)), expected_quality and expected_fitness by the same
  formulas;
* n_invalid: thresholds that were NaN or infinite (treated as 0: reject);
* block metrics, for a draft length ``gamma`` and a draft/target cost ratio c,
  on splits with ``draft_index`` (rows of one speculation block are
  consecutive with draft_index 0..gamma_data-1; depths >= gamma are ignored),
  tau_k the clamped threshold at depth k and r_k = min(1, p/q) there
  (Leviathan et al. 2023, arXiv 2211.17192, section 3):

  - tokens_per_call = mean over blocks of 1 + sum_{k=1..gamma} prod_{i<=k} tau_i
    (expected tokens one target call emits: the accepted prefix plus one);
  - speedup = tokens_per_call / (gamma*c + 1) (expected wall-time speedup over
    plain decoding when one draft step costs c target steps);
  - tv_per_token = sum over blocks of sum_k prod_{i<k} tau_i * max(0, tau_k - r_k),
    divided by the sum over blocks of their expected tokens per call (each
    depth's damage weighted by the probability it is reached, per emitted token).

Everything goes through the fused fast path (programs and expression rules are
lowered by :mod:`evolve.eval.fastpath.lowering` and scored by :mod:`evolve.eval.fastpath.scoring`;
function rules are called per token by :mod:`evolve.eval.function_rules`, then
reduced by the same kernels). Results do not depend on the number of threads.
"""
from __future__ import annotations

import weakref
from dataclasses import asdict, dataclass, field, fields
from operator import itemgetter

import numpy as np

from evolve.errors import InputError
from evolve.eval.costs import DEFAULT_COSTS, Costs
from evolve.traces.io import Traces
from evolve.verification.tokenwise import standard_threshold
from evolve.verification.tokenwise_block import block_expectation
from evolve.gp.compiler import Program
from evolve.kinds.registry import DEFAULT_KIND
from evolve.eval.function_rules import function_thresholds, function_thresholds_extra
from evolve.eval.fastpath.kernels import derive_row
from evolve.eval.fastpath.layouts import N_COUNTS, N_FITNESS_COUNTS, Count
from evolve.eval.fastpath.lowering import Lowered, Packed, lower, pack
from evolve.eval.fastpath.scheduler import chunk_bounds
from evolve.eval.fastpath.scoring import packed_thresholds, score_packed, score_tau
from evolve.gp.primitives import FEATURES, N_OPCODES

#: Memory the derived rows of one split may take (log/exp of features, see EvalData.derived_rows).
DERIVED_BUDGET_BYTES = 64 << 20


@dataclass(frozen=True)
class AcceptanceQualityFitness:
    """The acceptance-quality fitness: acceptance rate times a quality score, with a floor.

    quality Q = max(0, 1 - w_fa*FA/N - w_fr*FR/N) for false-accept and
    false-reject rates FA/N and FR/N; fitness = A*Q if Q >= floor else scale*Q
    (A: acceptance rate). Below the floor the fitness drops to a fraction of
    the quality alone, so rules that damage the output are never preferred to
    the standard rule for accepting more.
    """

    false_accept_weight: float = 10.0
    false_reject_weight: float = 0.1
    quality_floor: float = 0.95
    below_floor_scale: float = 0.5

    def quality(self, false_accept_rate: float, false_reject_rate: float) -> float:
        """Quality score in [0, 1] from false-accept and false-reject rates (fractions of N)."""
        return max(0.0, 1.0 - self.false_accept_weight * false_accept_rate
                   - self.false_reject_weight * false_reject_rate)

    def fitness(self, acceptance: float, quality: float) -> float:
        """Fitness from acceptance rate and quality score."""
        return acceptance * quality if quality >= self.quality_floor else self.below_floor_scale * quality


def split_target_calls(metadata: dict, split: str) -> int | None:
    """Target calls of a harvested split (its ``metadata.json`` statistics: ``target_calls``, or generated tokens /
    tokens per target call for datasets written before that key), or None when the metadata does not say.

    With the speculation blocks of the records, it gives the calls that drafted nothing (no record): the
    n-gram drafter without a match, the last token of a text (:attr:`EvalData.no_draft_calls`).
    """
    stats = ((metadata or {}).get("statistics") or {}).get(split) or {}
    if "target_calls" in stats:
        return int(stats["target_calls"])
    gen, tpc = stats.get("generated_tokens"), stats.get("tokens_per_target_call")
    if isinstance(gen, (int, float)) and isinstance(tpc, (int, float)) and tpc > 0:
        return int(round(gen / tpc))
    return None


def text_runs(seq_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Runs of consecutive records of one text: (starts int64 (m+1,), text int64 (m,)) of ``seq_id`` int64 (n,)
    (records starts[j]..starts[j+1]-1 have seq_id text[j])."""
    seq = np.asarray(seq_id, dtype=np.int64)
    cut = np.flatnonzero(seq[1:] != seq[:-1]) + 1
    starts = np.concatenate(([0], cut, [seq.size])).astype(np.int64) if seq.size else np.zeros(1, np.int64)
    return starts, seq[starts[:-1]].copy()


@dataclass
class EvalData:
    """A split prepared for the interpreter.

    ``X`` float64 (k, n), C-contiguous: one row per *available* feature, in the
    order of :data:`evolve.gp.primitives.FEATURES` (the six CORE_FEATURES first, so
    rows 0..5 are always the rule contract's arguments); ``feature_rows`` maps
    each index of FEATURES to its row (-1 when the split lacks it). An ``X``
    with one row per FEATURES entry (the v1 layout) is accepted as well.
    ``r`` float64 (n,) = min(1, p/q); ``u`` float64 (n,) rand_value; ``b`` bool
    (n,) baseline_accepts, which must equal u < r (as the schema guarantees;
    ValueError otherwise). ``bounds`` int64 (C+1,) are the work-item boundaries
    of the fast path (:func:`evolve.eval.fastpath.scheduler.chunk_bounds`, at speculation-block
    starts when the split has ``draft_index``); ``block_length`` is the split's
    draft length (max draft_index + 1) or None; ``no_draft_calls`` the target calls
    of the split that drafted nothing and so left no record (known for harvested
    splits, :func:`split_target_calls`; read by the verification-length scoring
    only, as plain decoding steps); ``text_runs`` the texts (``seq_id``) of the
    records as runs of consecutive records of one text, (starts int64 (m+1,), text
    int64 (m,): records starts[j]..starts[j+1]-1 belong to text[j]), or None (a split
    built from arrays alone), which :meth:`resample_texts` draws from; ``baseline``
    the number of baseline accepts (computed).
    """

    X: np.ndarray
    r: np.ndarray
    u: np.ndarray
    b: np.ndarray
    available: tuple[str, ...]
    source: str = "<memory>"
    split: str = ""
    block_start: np.ndarray | None = field(default=None, repr=False)
    feature_rows: tuple[int, ...] = field(default=(), repr=False)
    bounds: np.ndarray | None = field(default=None, repr=False)
    block_length: int | None = None
    no_draft_calls: int = 0
    text_runs: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)
    _derived: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _derived_map: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _derived_count: int = field(default=0, init=False, repr=False, compare=False)
    baseline: int = field(default=0, init=False)
    _depth: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.X = np.ascontiguousarray(self.X, dtype=np.float64)
        self.r = np.ascontiguousarray(self.r, dtype=np.float64)
        self.u = np.ascontiguousarray(self.u, dtype=np.float64)
        self.b = np.ascontiguousarray(self.b, dtype=np.bool_)
        if not (self.X.shape[1] == self.r.size == self.u.size == self.b.size):
            raise ValueError(f"X, r, u and b disagree in length ({self.X.shape[1]}, {self.r.size}, "
                             f"{self.u.size}, {self.b.size})")
        bad = self.b != (self.u < self.r)
        if bad.any():  # the kernels recompute the baseline decision as u < r
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{self.source}: baseline_accepts, row {i}: differs from rand_value < min(1, p/q)")
        self.baseline = int(np.count_nonzero(self.b))
        if not self.feature_rows:
            if self.X.shape[0] == len(FEATURES):
                rows = [i if f in self.available else -1 for i, f in enumerate(FEATURES)]
            else:
                avail = [f for f in FEATURES if f in self.available]
                if len(avail) != self.X.shape[0]:
                    raise ValueError(f"X has {self.X.shape[0]} rows for {len(avail)} available features")
                rows = [avail.index(f) if f in avail else -1 for f in FEATURES]
            self.feature_rows = tuple(rows)
        row = self.feature_rows[FEATURES.index("draft_index")]
        self._depth = depth = self.X[row] if row >= 0 else None
        if self.bounds is None:
            self.bounds = chunk_bounds(self.n, depth)
        if self.block_length is None and depth is not None and depth.size:
            self.block_length = int(depth.max()) + 1

    @property
    def n(self) -> int:
        """Number of records."""
        return int(self.r.size)

    @property
    def depth(self) -> np.ndarray | None:
        """The ``draft_index`` row of ``X`` (float64 (n,)), or None when the split lacks it."""
        return self._depth

    @classmethod
    def from_traces(cls, traces: Traces, share: bool = True) -> "EvalData":
        """Prepare a validated split.

        Memory: 8*(k+2)+1 bytes per token for k available features (65 for the
        six core features, 105 with all five optional ones), plus 16 bytes per run of one text's
        records (:attr:`text_runs`), and nothing else: arrays that
        are views into a larger buffer (a DataFrame's internal array) are copied so that
        the buffer can be freed. With ``share`` (default) the float64 feature
        columns, ``rand_value`` and ``baseline_accepts`` of ``traces`` are
        replaced by the arrays used here (same values), so keeping ``traces``
        alive costs no second copy of them.
        """
        n = traces.n
        avail = [f for f in FEATURES if traces.has(f)]
        X = np.empty((len(avail), n))
        for i, name in enumerate(avail):
            X[i] = traces[name]
            if share and traces[name].dtype == np.float64:
                traces.columns[name] = X[i]
        r = standard_threshold(X[avail.index("target_prob")], X[avail.index("draft_prob")])
        u = _owned(traces["rand_value"], np.float64)
        b = _owned(traces["baseline_accepts"], np.bool_)
        if share:
            traces.columns["rand_value"] = u
            traces.columns["baseline_accepts"] = b
        data = cls(X, r, u, b, tuple(avail), traces.source, traces.split,
                   text_runs=text_runs(traces["seq_id"]) if traces.has("seq_id") else None)
        calls = split_target_calls(traces.metadata, traces.split)
        if calls is not None and data.depth is not None:
            data.no_draft_calls = max(0, calls - int(np.count_nonzero(data.depth == 0)))
        return data

    def resample_texts(self, draw: np.ndarray) -> "EvalData":
        """The split made of the texts ``draw`` (int64 (k,): indices into the sorted distinct text ids, repeats
        allowed, e.g. a row of :func:`evolve.eval.bootstrap.group_draws`), each text's records in their order, the
        texts in the order drawn (a text's records are whole speculation blocks, so blocks stay whole).
        ``no_draft_calls`` is scaled by the share of records drawn (rounded): which text a call without a record
        belonged to is not recorded.

        Raises: ValueError when the split has no text ids (:attr:`text_runs` None)."""
        if self.text_runs is None:
            raise ValueError(f"{self.source}: the split has no text ids to resample")
        starts, text = self.text_runs
        ids, index = np.unique(text, return_inverse=True)
        runs_of = [np.flatnonzero(index == t) for t in range(ids.size)]
        pieces = [np.arange(starts[j], starts[j + 1]) for t in draw for j in runs_of[t]]
        rows = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
        calls = int(round(self.no_draft_calls * rows.size / self.n)) if self.n else 0
        new_starts = np.concatenate(([0], np.cumsum([p.size for p in pieces]))).astype(np.int64)
        new_text = np.array([ids[t] for t in draw for _ in runs_of[t]], dtype=np.int64)
        return EvalData(self.X[:, rows], self.r[rows], self.u[rows], self.b[rows], self.available, self.source,
                        self.split, feature_rows=self.feature_rows, block_length=self.block_length,
                        no_draft_calls=calls, text_runs=(new_starts, new_text))

    @property
    def texts(self) -> int:
        """Number of distinct texts (0 without text ids)."""
        return 0 if self.text_runs is None else int(np.unique(self.text_runs[1]).size)

    def feature(self, name: str) -> np.ndarray:
        """Row of ``X`` for feature ``name``, float64 (n,). Raises KeyError if the split lacks it."""
        row = self.feature_rows[FEATURES.index(name)]
        if row < 0:
            raise KeyError(name)
        return self.X[row]

    def nbytes(self) -> int:
        """Bytes held by the arrays (X, r, u, b, bounds, text ids, computed derived rows)."""
        return int(self.X.nbytes + self.r.nbytes + self.u.nbytes + self.b.nbytes + self.bounds.nbytes
                   + (0 if self.text_runs is None else sum(a.nbytes for a in self.text_runs))
                   + 8 * self.n * self._derived_count)

    def clear_derived(self) -> None:
        """Drop the derived rows (they are recomputed on the next request)."""
        self._derived, self._derived_map, self._derived_count = None, None, 0

    def derived_rows(self, pairs) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Derived rows for ``pairs`` of (opcode, FEATURES index): log or exp of a feature, computed once.

        Rows are computed on first request with the kernels' own loops (bit
        for bit what the instruction gives) and kept, up to
        :data:`DERIVED_BUDGET_BYTES` in total (none at all for splits so large
        that one row exceeds it). Returns (D float64 (k, n), map int64
        (opcodes, X rows) of D rows or -1), or (None, None) when none exist.
        """
        capacity = min(2 * self.X.shape[0], DERIVED_BUDGET_BYTES // max(8 * self.n, 1))
        if capacity <= 0:
            return None, None
        if self._derived is None:
            self._derived = np.empty((capacity, self.n))  # pages are touched only when a row is written
            self._derived_map = np.full((N_OPCODES, self.X.shape[0]), -1, dtype=np.int64)
        for op, feature in sorted(pairs):
            row = self.feature_rows[feature]
            if row < 0 or self._derived_map[op, row] >= 0 or self._derived_count >= capacity:
                continue
            derive_row(op, self.X[row], self._derived[self._derived_count])
            self._derived_map[op, row] = self._derived_count
            self._derived_count += 1
        if self._derived_count == 0:
            return None, None
        return self._derived, self._derived_map


def _owned(a: np.ndarray, dtype) -> np.ndarray:
    """``a`` as a C-contiguous array of ``dtype`` that owns its memory (copied if it is a view)."""
    a = np.ascontiguousarray(a, dtype=dtype)
    return a if a.base is None else a.copy()


@dataclass(frozen=True)
class Metrics:
    """Metrics of one rule on one split (see module doc). Rates are fractions, not percent.

    ``records`` is the number of records scored (one per drafted token of the split,
    whether or not it was ever reached); every rate is a fraction of it.

    ``tokens_per_call``, ``speedup`` and ``tv_per_token`` are None unless block
    metrics were asked for (``gamma``) on a split with ``draft_index``;
    :meth:`to_dict` leaves them out while they are None.
    """

    records: int
    acceptance_rate: float
    accuracy: float
    false_accepts: int
    false_rejects: int
    quality_score: float
    fitness: float
    expected_acceptance: float
    expected_tv: float
    expected_false_reject: float
    expected_quality: float
    expected_fitness: float
    n_invalid: int
    tokens_per_call: float | None = None
    speedup: float | None = None
    tv_per_token: float | None = None

    def to_dict(self) -> dict:
        """Plain dict of the fields; the block metrics (:data:`BLOCK_FIELDS`) only when they were computed."""
        d = asdict(self)
        for k in BLOCK_FIELDS:
            if d[k] is None:
                del d[k]
        return d


#: Metrics fields of the block-level metrics (None unless asked for with ``gamma``).
BLOCK_FIELDS: tuple[str, ...] = ("tokens_per_call", "speedup", "tv_per_token")
_METRIC_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Metrics))


# the counts metrics_from_counts reads, fetched by one call (an IntEnum lookup per field costs more)
_FITNESS_COUNTS = itemgetter(Count.ACCEPT, Count.FALSE_ACCEPT, Count.FALSE_REJECT, Count.INVALID, Count.SUM_TAU,
                             Count.SUM_TV, Count.SUM_EXPECTED_FR)
_BLOCK_COUNTS = itemgetter(Count.BLOCKS, Count.SUM_TOKENS, Count.SUM_BLOCK_TV)


def metrics_from_counts(counts: np.ndarray, n: int, fitness: AcceptanceQualityFitness = AcceptanceQualityFitness(),
                        gamma: int | None = None, costs: Costs = DEFAULT_COSTS) -> Metrics:
    """Turn counts (float64 (N_FITNESS_COUNTS,) or (N_COUNTS,), a :class:`evolve.eval.fastpath.layouts.Count`
    record) over ``n`` tokens into :class:`Metrics`.

    With n == 0 every rate is 0. Block metrics are filled when ``gamma`` is
    given and the counts hold at least one speculation block; the speedup is ``costs``'s
    (:meth:`evolve.eval.costs.Costs.speedup`).
    """
    if n == 0:
        return Metrics(0, 0.0, 0.0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0)
    c = counts.tolist()  # plain floats: much faster than numpy scalars here
    accepts, fa, fr, invalid, s_tau, s_tv, s_fr = _FITNESS_COUNTS(c)
    fa, fr = int(fa), int(fr)
    acceptance = accepts / n
    quality = fitness.quality(fa / n, fr / n)
    e_acc, e_tv, e_fr = s_tau / n, s_tv / n, s_fr / n
    e_quality = fitness.quality(e_tv, e_fr)
    tpc = speedup = tv_tok = None
    if gamma is not None and len(c) == N_COUNTS:
        blocks, s_tokens, s_block_tv = _BLOCK_COUNTS(c)
        if blocks > 0:
            tpc = s_tokens / blocks
            speedup = costs.speedup(tpc, gamma)
            tv_tok = s_block_tv / s_tokens
    # a frozen dataclass's __init__ sets fields one by one through object.__setattr__; filling
    # __dict__ directly gives the same object several times faster (this runs once per program)
    m = object.__new__(Metrics)
    m.__dict__.update(zip(_METRIC_FIELDS, (
        n, acceptance, (n - fa - fr) / n, fa, fr, quality, fitness.fitness(acceptance, quality),
        e_acc, e_tv, e_fr, e_quality, fitness.fitness(e_acc, e_quality), int(invalid), tpc, speedup, tv_tok)))
    return m


def check_features(program: Program, data: EvalData, what: str = "program") -> None:
    """Raise InputError if ``program`` reads a feature the split lacks."""
    missing = [f for f in program.features if f not in data.available]
    if missing:
        raise InputError(f"{data.source}: {what} needs column '{missing[0]}', which this split lacks")


def check_gamma(gamma: int | None, data: EvalData) -> int:
    """The draft length to use for block counts on ``data`` (0: none) after validating ``gamma``.

    Contract: ``gamma`` is the caller's requested draft length, None meaning
    "no block metrics". Returns 0 when ``gamma`` is None or when the split has
    no ``draft_index`` (block metrics are then skipped, not an error);
    otherwise ``int(gamma)``, which is at least 1 and at most the split's block
    length (:attr:`EvalData.block_length`, max draft_index + 1), since deeper
    drafted tokens do not exist in the data. There is no fixed upper bound.

    Raises: InputError naming ``gamma`` and its value when gamma is not an
    integer >= 1 or exceeds the split's block length.
    """
    if gamma is None:
        return 0
    if isinstance(gamma, bool) or not isinstance(gamma, (int, np.integer)) or gamma < 1:
        raise InputError(f"gamma (the draft length) must be an integer >= 1 (value {gamma!r})")
    if data.block_length is None:
        return 0
    if gamma > data.block_length:
        raise InputError(f"gamma (the draft length) is larger than the block length {data.block_length} of "
                         f"{data.source} (draft_index 0..{data.block_length - 1}) (value {gamma})")
    return int(gamma)


# lowered/packed programs, cached per (program object, feature layout)
_PACKED: dict[tuple[int, tuple[int, ...]], tuple[weakref.ref, Lowered, Packed]] = {}
_PACKED_LIMIT = 4096


def lowered_program(program: Program, data: EvalData) -> tuple[Lowered, Packed]:
    """The program lowered to register code for ``data``'s feature rows, and packed alone (cached)."""
    key = (id(program), data.feature_rows)
    hit = _PACKED.get(key)
    if hit is not None and hit[0]() is program:
        return hit[1], hit[2]
    lo = lower(program.ops, program.args, program.consts, data.feature_rows)
    packed = pack([lo])
    if len(_PACKED) >= _PACKED_LIMIT:
        _PACKED.clear()
    _PACKED[key] = (weakref.ref(program), lo, packed)
    return lo, packed


def program_counts(program: Program, data: EvalData, gamma: int = 0) -> np.ndarray:
    """Fast-path counts of a compiled program (float64 (N_COUNTS,)); block counts when gamma > 0."""
    _, packed = lowered_program(program, data)
    return score_packed(packed, data.X, data.r, data.u, data.bounds, data.depth, gamma, baseline=data.baseline)[0]


def thresholds(rule, data: EvalData) -> np.ndarray:
    """Raw thresholds (float64 (n,), before NaN handling and clamping) of a rule or program.

    ``rule`` is a :class:`Program` or a :class:`heuristics.contract.Rule`.
    Raises: InputError if the rule needs a column the split lacks.
    """
    program = rule if isinstance(rule, Program) else rule.program
    if program is not None:
        check_features(program, data, getattr(rule, "name", "program"))
        lo, _ = lowered_program(program, data)
        return packed_thresholds(lo, data.X, data.bounds)
    out = np.empty(data.n)
    if rule.extra_columns:
        missing = [c for c in rule.extra_columns if c not in data.available]
        if missing:
            raise InputError(f"{data.source}: rule '{rule.name}' needs column '{missing[0]}', which this split lacks")
        E = np.ascontiguousarray(np.stack([data.feature(c) for c in rule.extra_columns]))
        return function_thresholds_extra(rule.compiled(), data.X, E, out)
    return function_thresholds(rule.compiled(), data.X, out)


def threshold_counts(tau: np.ndarray, data: EvalData, gamma: int = 0) -> np.ndarray:
    """Counts (float64 (N_COUNTS,)) of given raw thresholds ``tau`` float64 (n,), by the fast-path reductions."""
    tau = np.ascontiguousarray(tau, dtype=np.float64)
    if tau.shape != (data.n,):
        raise ValueError(f"tau has shape {tau.shape}, expected ({data.n},)")
    return score_tau(tau, data.r, data.u, data.bounds, data.depth, gamma, data.baseline)


def evaluate_thresholds(tau: np.ndarray, data: EvalData, fitness: AcceptanceQualityFitness = AcceptanceQualityFitness(), *,
                        gamma: int | None = None, costs: Costs = DEFAULT_COSTS) -> Metrics:
    """Metrics of given raw thresholds ``tau`` float64 (n,)."""
    g = check_gamma(gamma, data)
    return metrics_from_counts(threshold_counts(tau, data, g), data.n, fitness, gamma, costs)


def evaluate(rule, data: EvalData, fitness: AcceptanceQualityFitness = AcceptanceQualityFitness(), *,
             gamma: int | None = None, costs: Costs = DEFAULT_COSTS) -> Metrics:
    """Metrics of a :class:`Program` or :class:`heuristics.contract.Rule` on ``data``.

    Expression rules and programs run through the fused interpreter (parallel
    over token chunks); function rules are called per token by a compiled loop,
    then reduced by the same kernels.

    Args:
        gamma: draft length for the block metrics (tokens_per_call, speedup,
            tv_per_token); None skips them. They stay None on a split without
            ``draft_index``.
        costs: the cost model of the speedup (:class:`evolve.eval.costs.Costs`; a draft/target cost ratio c
            is :func:`evolve.eval.costs.ratio_costs`).

    Raises: InputError if the rule needs a column the split lacks, for a
    gamma below 1 or above the split's block length (:func:`check_gamma`), or for a rule whose
    kind of program is not a per-token threshold (:mod:`evolve.kinds.registry`; a
    relaxation weight is scored by :mod:`evolve.kinds.relaxation.eval_population`).
    """
    kind = getattr(rule, "program_kind", DEFAULT_KIND)
    if kind is not DEFAULT_KIND:
        raise kind.refuse("per-token evaluation (evolve.eval.evaluator.evaluate)", f"rule '{rule.name}'")
    program = rule if isinstance(rule, Program) else rule.program
    if program is not None:
        check_features(program, data, getattr(rule, "name", "program"))
        g = check_gamma(gamma, data)
        return metrics_from_counts(program_counts(program, data, g), data.n, fitness, gamma, costs)
    g = check_gamma(gamma, data)
    return metrics_from_counts(threshold_counts(thresholds(rule, data), data, g), data.n, fitness,
                               gamma, costs)


def reference_metrics(tau: np.ndarray, traces: Traces, fitness: AcceptanceQualityFitness = AcceptanceQualityFitness(), *,
                      gamma: int | None = None, costs: Costs = DEFAULT_COSTS) -> Metrics:
    """Plain-numpy metrics of raw thresholds, independent of the interpreter (for tests).

    Block metrics (with ``gamma``, on traces with ``draft_index``) are computed
    by an explicit loop over blocks (:func:`evolve.verification.tokenwise_block.block_expectation` each).
    """
    tau = np.asarray(tau, dtype=np.float64)
    n = tau.size
    invalid = ~np.isfinite(tau)
    t = np.clip(np.where(invalid, 0.0, tau), 0.0, 1.0)
    r = standard_threshold(traces["target_prob"], traces["draft_prob"])
    accept = traces["rand_value"] < t
    base = traces["baseline_accepts"]
    counts = np.zeros(N_COUNTS)
    counts[:N_FITNESS_COUNTS] = [accept.sum(), (accept & ~base).sum(), (base & ~accept).sum(), invalid.sum(),
                  t.sum(), np.maximum(0.0, t - r).sum(), np.maximum(0.0, r - t).sum()]
    if gamma is not None and traces.has("draft_index"):
        d = traces["draft_index"]
        starts = np.flatnonzero(d == 0).tolist() + [n]
        for s, e in zip(starts[:-1], starts[1:]):
            tokens, tv = block_expectation(t[s:min(e, s + gamma)], r[s:e])
            counts[Count.BLOCKS] += 1
            counts[Count.SUM_TOKENS] += tokens
            counts[Count.SUM_BLOCK_TV] += tv
    return metrics_from_counts(counts, n, fitness, gamma, costs)
