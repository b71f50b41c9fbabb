"""The rows of ``benchmark.py``'s comparison table: one scored rule (or verifier) on one split.

A :class:`Row` holds either a rule's :class:`evolve.eval.evaluator.Metrics`
(role ``baseline`` for a registered rule, ``champion`` for a champion file) or,
for the lossless verifier ``block_verification`` (role ``verifier``), its
block metrics alone (:class:`evolve.eval.block_verification.BlockVerificationMetrics`):
it has no per-token threshold, so the per-token columns stay empty (None in
JSON, empty in CSV, ``-`` in the tables). A champion of kind ``relaxation``
(:mod:`evolve.kinds.registry`: the weight w of relaxed block verification) has no
per-token threshold either: its row holds relaxed block verification's block
metrics alone (:class:`evolve.eval.relaxed_block.RelaxedMetrics`) in the same
way; so does a verification-length policy's row (:class:`evolve.kinds.verify_length.eval_policy.LengthMetrics`) and
the competitor policies' (role ``policy``, :mod:`evolve.commands.compare.speed`). ``program_kind`` says
which kind of program a rule's row scored (``threshold``, ``relaxation``, ``verify-length``; None for
the verifier). Under a cost file rows carry ``tokens_per_second`` and the cost file's ``speedup``; priced by a
flat cost ratio (``in_seconds`` False) a row has no tokens per second, so no column in tokens per second shows a rate
in target steps. :data:`ROW_KEYS` are
the keys of one JSON record or CSV row, in order.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from evolve.traces.io import SPLITS
from evolve.eval.block_verification import BlockVerificationMetrics
from evolve.eval.costs import DEFAULT_COSTS, Costs
from evolve.eval.evaluator import BLOCK_FIELDS, Metrics
from evolve.eval.relaxed_block import RelaxedMetrics
from heuristics import registry
from heuristics.contract import Rule

#: Values of ``--format``.
FORMATS: tuple[str, ...] = ("table", "csv", "json", "markdown")
#: Values of ``--split``; ``all`` means every split in :data:`evolve.traces.io.SPLITS` order.
SPLIT_CHOICES: tuple[str, ...] = SPLITS + ("all",)
#: The rule champions are compared with.
REFERENCE_RULE = registry.STANDARD_NAME
#: Default number of timed evaluations per rule (after one warm-up).
DEFAULT_REPEATS = 3
#: Name and role of the block verification row.
BLOCK_VERIFICATION = "block_verification"
VERIFIER = "verifier"
#: Keys of one JSON record / CSV row, in order.
ROW_KEYS: tuple[str, ...] = (
    "heuristic", "role", "split", "records", "acceptance_rate", "accuracy", "quality_score", "fitness",
    "false_accepts", "false_rejects", "expected_acceptance", "expected_tv", "expected_false_reject",
    "expected_quality", "expected_fitness", "n_invalid", "time_ms", "delta_fitness", "delta_acceptance",
    "delta_expected_fitness", "delta_expected_acceptance", "delta_expected_tv", "expression", "data",
    "tokens_per_call", "speedup", "tv_per_token", "gamma", "cost_ratio", "program_kind", "tokens_per_second",
)
_METRIC_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Metrics))


@dataclass(frozen=True)
class ComparedRule:
    """A rule to score in the table: ``role`` is ``baseline`` (from the registry) or
    ``champion``; ``origin`` is ``registry`` or the champion's file/directory."""

    rule: Rule
    role: str
    origin: str


@dataclass(frozen=True)
class Row:
    """One rule (or block verification) scored on one split.

    ``time_ms`` is the best wall time of one evaluation in milliseconds (see
    :mod:`evolve.commands.compare.table`). The ``delta_*`` fields are the champion's
    metric minus ``standard_rejection``'s on the same split (None for
    baselines). ``metrics`` is None for the verifier row and for a relaxation
    champion's row, whose block metrics are in ``verifier`` (block
    verification's or relaxed block verification's, duck-compatible in
    :data:`evolve.eval.evaluator.BLOCK_FIELDS`) and whose record count is
    ``records``. ``program_kind``: the kind of program of the row's rule; ``per_text`` its calls summed per text
    (verification-length rows), not written.
    """

    heuristic: str
    role: str
    split: str
    data: str
    metrics: Metrics | None
    time_ms: float
    expression: str | None = None
    delta_fitness: float | None = None
    delta_acceptance: float | None = None
    delta_expected_fitness: float | None = None
    delta_expected_acceptance: float | None = None
    delta_expected_tv: float | None = None
    gamma: int | None = None
    cost_ratio: float | None = None
    verifier: BlockVerificationMetrics | RelaxedMetrics | None = None
    records: int | None = None
    program_kind: str | None = None
    tokens_per_second: float | None = None
    cost_speedup: float | None = None
    #: (text ids int64 (T,), each text's (expected tokens, seconds) float64 (T, 2)) of the row's calls, for the
    #: bootstrap over texts of the headroom (:mod:`evolve.eval.headroom`); None when not computed. Never written.
    per_text: tuple | None = field(default=None, compare=False, repr=False)
    in_seconds: bool = True

    def value(self, name: str):
        """A metric of the row (a :class:`Metrics` field name, or ``tokens_per_second``), or None when it has
        none (verifier rows). Under a cost file ``speedup`` is the cost file's (``cost_speedup``). ``in_seconds``
        False (the row was priced by a flat cost ratio, whose time unit is a target step, not a second): no
        ``tokens_per_second``, whatever the row's metrics call their rate."""
        if name == "speedup" and self.cost_speedup is not None:
            return self.cost_speedup
        if name == "tokens_per_second":
            if not self.in_seconds:
                return None
            if self.tokens_per_second is not None:
                return self.tokens_per_second
            return getattr(self.verifier, name, None)
        if self.metrics is not None:
            return getattr(self.metrics, name)
        if self.verifier is not None and name in BLOCK_FIELDS:
            return getattr(self.verifier, name)
        return self.records if name == "records" else None

    def to_dict(self) -> dict:
        """Plain dict with exactly the keys :data:`ROW_KEYS`, in that order."""
        if self.metrics is not None:
            m = {**dict.fromkeys(BLOCK_FIELDS), **self.metrics.to_dict()}
        else:
            m = {k: self.value(k) for k in _METRIC_KEYS}
        values = {**m, "gamma": self.gamma, "cost_ratio": self.cost_ratio if self.gamma else None,
                  "speedup": self.value("speedup"), "tokens_per_second": self.value("tokens_per_second"),
                  **{k: getattr(self, k) for k in (
            "heuristic", "role", "split", "data", "time_ms", "expression", "delta_fitness", "delta_acceptance",
            "delta_expected_fitness", "delta_expected_acceptance", "delta_expected_tv", "program_kind")}}
        return {k: values[k] for k in ROW_KEYS}


@dataclass
class Comparison:
    """Rows of every scored (rule, split), in split then rule order, and notes on skipped rules.

    ``champions`` maps a champion row's label to what its champion file records for the verdict
    (:func:`evolve.report.compare.verdict.champion_records`: ``path``, ``objective``,
    ``champion_source``); empty when the rows were built otherwise.
    """

    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    repeats: int = DEFAULT_REPEATS
    splits: tuple[str, ...] = ()
    tokens: dict[str, int] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    #: SHA-256 of each scored split's records file (the bytes scored), as :attr:`evolve.traces.io.Traces.sha256`.
    digests: dict[str, str | None] = field(default_factory=dict)
    gamma: dict[str, int | None] = field(default_factory=dict)
    #: The one cost model of every figure (a cost file's, ``measured``, adds tokens per second).
    costs: Costs = DEFAULT_COSTS
    champions: dict[str, dict] = field(default_factory=dict)
    #: Throughput against concurrent requests (:mod:`evolve.commands.compare.concurrency`), or None.
    concurrency: list[dict] | None = None
    #: Per split: the per-batch-size schedule of fixed lengths (:func:`evolve.kinds.verify_length.eval_schedule.split_schedule`).
    schedules: dict[str, dict] = field(default_factory=dict)
    #: What the kinds' compare hooks add to the caption about their competitor rows (``KindScorer.note``).
    notes_of_kinds: list[str] = field(default_factory=list)
    #: Per champion row and split: the share of the headroom it captures and its standing against the competitors
    #: (``KindScorer.headroom``; :mod:`evolve.eval.headroom`).
    headroom: list[dict] = field(default_factory=list)


__all__ = ["FORMATS", "SPLIT_CHOICES", "REFERENCE_RULE", "DEFAULT_REPEATS", "BLOCK_VERIFICATION", "VERIFIER",
           "ROW_KEYS", "ComparedRule", "Row", "Comparison"]
