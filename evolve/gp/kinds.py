"""Kinds of program: what an evolved or registered program's value means, and who may use it.

A program of the primitive set computes one float from one record's features; its *kind* says
what that float is for. Today:

* ``threshold``: the per-token acceptance threshold tau of speculative sampling: the drafted
  token x is accepted iff u < tau with u ~ U[0, 1); tau = min(1, p(x)/q(x)) is the lossless
  standard rule (Leviathan et al. 2023, arXiv 2211.17192; Chen et al. 2023, arXiv 2302.01318).
* ``relaxation``: the weight w in [0, 1] of relaxed block verification, which verifies a block
  with the lossless block verification of Sun et al. 2024 (arXiv 2403.10444) against the mixture
  target p~ = (1 - w) p + w q (the mixture of speculative cascades, Narasimhan et al. 2024,
  arXiv 2405.19261). w may read prefix-level features only (never the drafted token), so the
  relaxed target is a function of the prefix and block verification against it stays exact
  (:mod:`evolve.eval.relaxed_block`).
* ``verify-length``: a verification-length policy: before each draft step, from the drafter's side of
  the last drafted token (its probability, top probability, entropy, the cumulative product of the
  drafter's probabilities, the draft index), whether to draft one more token; every drafted token is
  verified with the standard rule, so it is lossless; scored in tokens per second under a cost file
  (:mod:`evolve.eval.verify_length`, :mod:`evolve.eval.costs`).
* ``tree-shape``: a draft-tree shape: at the root and at every kept node of a harvested draft tree, from
  the drafter's side of the node, how many of its drawn children to keep (ceil(v), none for v <= 0);
  the kept tree is verified by SpecInfer's recursive rejection sampling, so it is lossless; scored in
  tokens per second under a cost file on the dataset's tree tables (:mod:`evolve.eval.tree_shape`).

The kind is written into every champion file (key ``kind``) and run document, and every command
dispatches on it through a table keyed by the kind's name in its own module: the search's scorers
(:data:`evolve.eval.scorers.POPULATION_SCORERS`), ``benchmark.py``
(:data:`evolve.report.compare.table.KIND_SCORERS`), ``benchmark.py simulate``
(:data:`evolve.report.simulate.KIND_PLANS`), ``benchmark.py live``
(:data:`evolve.report.live.KIND_DECODERS`), ``benchmark.py pareto --rule``
(:data:`evolve.report.pareto.command.RULE_CURVES`) and ``python -m evolve export``
(:data:`evolve.export.exporter.LAYOUTS`). A command that cannot use a kind refuses in one line
naming the commands that can (:meth:`ProgramKind.refuse`); per-token evaluation
(:func:`evolve.eval.evaluator.evaluate`) refuses every kind but ``threshold``.

Adding a kind: one :class:`ProgramKind` here (registered in :data:`KINDS`), its own modules for
scoring (and simulation, export), and an entry in each command's table; ``tests/test_kinds.py``
checks that every registered kind reaches every command it names.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from evolve.errors import InputError
from evolve.gp.primitives import DERIVED_FEATURES, LEVEL_FEATURES, LOOKUP_FEATURES


@dataclass(frozen=True)
class ProgramKind:
    """One kind of program (see the module doc).

    Attributes:
        name: registry name, also the value of ``python -m evolve run --evolve`` and of the key
            ``kind`` of champion files (``threshold``, ``relaxation``).
        title: what one value of the program is, in words (``acceptance threshold``).
        output: one line: the value's range and how it is applied.
        function_name: name of the function of an exported module (:mod:`evolve.export`) and of
            a champion's generated ``NAME.py``.
        excluded_features: features a program of this kind may not read; ``excluded_reason`` says why.
        derived_features: features its scorer computes from the records (no column needed).
        columns: optional dataset columns scoring a program of this kind needs.
        commands: the commands that run a program of this kind (as a user types them).
        source: where the algorithm that applies the value comes from.
        settings: run settings (:class:`evolve.search.config.RunConfig` fields) that only a run of this kind
            reads; another run refuses a value other than the default.
        reads_gamma: whether its scoring reads the run's draft length ``gamma`` (a tree shape does not: the
            harvested trees bound it).
    """

    name: str
    title: str
    output: str
    function_name: str
    excluded_features: tuple[str, ...] = ()
    excluded_reason: str = ""
    derived_features: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    source: str = ""
    settings: tuple[str, ...] = ()
    reads_gamma: bool = True

    def check_features(self, features, what: str) -> None:
        """Raise InputError naming ``what`` if ``features`` holds one this kind may not read."""
        bad = [f for f in features if f in self.excluded_features]
        if bad:
            raise InputError(f"{what}: reads '{bad[0]}', which a {self.title} may not read ({self.excluded_reason})")

    def refuse(self, command: str, what: str) -> InputError:
        """The one-line error of ``command`` asked to run ``what``, a program of this kind it cannot use."""
        can = "; ".join(self.commands) or "no command yet"
        return InputError(f"{what}: is a {self.name} program ({self.title}); `{command}` cannot run it "
                          f"(use: {can})")


#: Features that depend on the drafted token X_i: a relaxation weight must not read them (p~_i would
#: depend on X_i, and block verification against it would no longer be exact).
TOKEN_FEATURES: tuple[str, ...] = ("draft_prob", "target_prob", "target_rank")
#: Features only the target's forward pass gives: a verification-length policy decides before it.
TARGET_FEATURES: tuple[str, ...] = ("target_prob", "target_entropy", "top_token_match", "target_top_prob", "overlap",
                                    "target_rank")
_DERIVED = "draft_cumprob is the survival estimate of a verification-length policy, not a record column"
_LOOKUP = "lookup_len and lookup_freq describe a prompt-lookup draft for a verification-length policy"
_LEVEL = "level_cumprob and level_rank describe a draft tree's level for a tree-shape program"

THRESHOLD = ProgramKind(
    name="threshold", title="acceptance threshold",
    output="tau in [0, 1] per drafted token; the token is accepted iff u < tau (u ~ U[0, 1))",
    function_name="acceptance_threshold", excluded_features=DERIVED_FEATURES + LOOKUP_FEATURES + LEVEL_FEATURES,
    excluded_reason=f"{_DERIVED}; {_LOOKUP}; {_LEVEL}",
    commands=("python benchmark.py", "python benchmark.py simulate", "python benchmark.py pareto",
              "python benchmark.py live", "python -m evolve export", "python -m evolve promote",
              "python -m evolve run"),
    source="speculative sampling: Leviathan et al. 2023 (arXiv 2211.17192); Chen et al. 2023 (arXiv 2302.01318)",
)
RELAXATION = ProgramKind(
    name="relaxation", title="relaxation weight",
    output="w in [0, 1] per block position; the block is verified against (1 - w) p + w q",
    function_name="relaxation_weight", excluded_features=TOKEN_FEATURES + DERIVED_FEATURES + LOOKUP_FEATURES
    + LEVEL_FEATURES,
    excluded_reason=f"draft_prob, target_prob and target_rank depend on the drafted token; {_DERIVED}; {_LOOKUP}; "
                    f"{_LEVEL}",
    columns=("draft_index", "overlap", "block_residual_mass", "block_residual_phi"),
    commands=("python benchmark.py", "python benchmark.py simulate", "python benchmark.py pareto",
              "python benchmark.py live", "python benchmark.py trees", "python -m evolve export",
              "python -m evolve promote", "python -m evolve run"),
    source="block verification: Sun et al. 2024 (arXiv 2403.10444), against the mixture target of "
           "Narasimhan et al. 2024 (arXiv 2405.19261)",
)

VERIFY_LENGTH = ProgramKind(
    name="verify-length", title="verification-length policy",
    output="v per draft step, from the drafter's side of the last drafted token (and, for prompt lookup, the "
           "next token's match); draft one more token iff v > 0, then verify every drafted token with the standard rule",
    function_name="keep_drafting", excluded_features=TARGET_FEATURES + LEVEL_FEATURES,
    excluded_reason=f"the target's quantities are not known before the target is called; {_LEVEL}",
    derived_features=DERIVED_FEATURES,
    columns=("draft_index",),
    commands=("python benchmark.py", "python benchmark.py live", "python -m evolve export", "python -m evolve promote",
              "python -m evolve run"),
    source="when to stop drafting: SpecDec++ (Huang et al. 2024, arXiv 2405.19715); confidence-scheduled "
           "verification of DSpark (Cheng et al. 2026, arXiv 2607.05147)",
    settings=("verify_with", "length_weighting"),
)

TREE_SHAPE = ProgramKind(
    name="tree-shape", title="draft-tree shape",
    output="v per tree node (the root included), from the drafter's side of the node; keep its first ceil(v) "
           "drawn children (none for v <= 0), then verify the kept tree with SpecInfer's recursive rejection sampling",
    function_name="tree_children", excluded_features=TARGET_FEATURES + LOOKUP_FEATURES,
    excluded_reason=f"the target's quantities are not known before the target is called; {_LOOKUP}",
    derived_features=DERIVED_FEATURES + LEVEL_FEATURES,
    commands=("python benchmark.py trees", "python -m evolve export", "python -m evolve promote",
              "python -m evolve run"),
    source="draft trees: SpecInfer (Miao et al. 2024, arXiv 2305.09781); EAGLE-2's dynamic trees (Li et al. "
           "2024, arXiv 2406.16858)",
    reads_gamma=False,
)

#: The registered kinds by name, in the order commands list them.
KINDS: dict[str, ProgramKind] = {k.name: k for k in (THRESHOLD, RELAXATION, VERIFY_LENGTH, TREE_SHAPE)}


def program_kind(name: Any, what: str = "kind") -> ProgramKind:
    """The registered kind called ``name``. Raises InputError naming ``what`` for an unknown one."""
    if isinstance(name, ProgramKind):
        return name
    if not isinstance(name, str) or name not in KINDS:
        raise InputError(f"{what}: unknown kind of program {name!r} (known: {', '.join(KINDS)})")
    return KINDS[name]


#: The kinds older run configurations named by ``verify``: ``token`` programs were thresholds, ``block``
#: programs relaxation weights.
LEGACY_VERIFY: dict[str, str] = {"token": THRESHOLD.name, "block": RELAXATION.name}


def kind_from_config(config: Mapping[str, Any] | None) -> ProgramKind:
    """The kind of program a run configuration evolved (its ``evolve`` key; before that key existed,
    ``verify = "block"`` meant relaxation weights). Unknown or missing values give ``threshold``."""
    if not isinstance(config, Mapping):
        return THRESHOLD
    name = config.get("evolve")
    if isinstance(name, str) and name in KINDS:
        return KINDS[name]
    return KINDS[LEGACY_VERIFY.get(config.get("verify"), THRESHOLD.name)]


__all__ = ["ProgramKind", "THRESHOLD", "RELAXATION", "VERIFY_LENGTH", "TREE_SHAPE", "KINDS", "TOKEN_FEATURES", "TARGET_FEATURES", "LEGACY_VERIFY", "program_kind",
           "kind_from_config"]
