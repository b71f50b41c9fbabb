"""The settings of a verification-length run (:class:`LengthSettings`): what verifies the drafts the policy sends
(``verify_with``) and how the harvested blocks are weighted (``length_weighting``). The run configuration holds them
as one field (:attr:`evolve.search.config.RunConfig.kind_settings`); a champion carries them in its provenance.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evolve.kinds.base import kind_setting

#: How blocks are weighted (:func:`evolve.kinds.verify_length.eval_policy.block_cover`), by name: what every harvested block stands for.
WEIGHTINGS: dict[str, str] = {"call": "one call of the policy",
                              "position": "the text positions its harvest call covered"}


#: The weighting of a run or table that names none.
DEFAULT_WEIGHTING = "call"


@dataclass(frozen=True)
class LengthVerifier:
    """What verifies the drafted tokens a verification-length policy sends (the ``verify_with`` setting).

    ``name``: a label (``standard_rejection``, ``block_verification``, a rule's name); ``rule``: a threshold
    rule (per-token verifier) or a relaxation rule (relaxed block verification), any object
    :func:`evolve.eval.evaluator.thresholds` reads; None with ``block`` False: the standard rule;
    ``block``: block verification (with ``rule`` its relaxation weight). ``lossless``: whether its
    output is the target's distribution.
    """

    name: str = "standard_rejection"
    rule: Any = None
    block: bool = False
    lossless: bool = True


def verifier_from_parts(name: str, rule: Any, block: bool) -> LengthVerifier:
    """The :class:`LengthVerifier` of ``(name, rule, block)`` as :func:`heuristics.verifiers.verifier_parts`
    gives them; lossless for no rule, or a per-token rule that says it is lossless."""
    return LengthVerifier(name, rule, block, lossless=rule is None or (not block and bool(rule.lossless)))


#: The default verifier: the standard rule min(1, p/q).
STANDARD_VERIFIER = LengthVerifier()


#: Lossless block verification (Sun et al. 2024, arXiv 2403.10444).
BLOCK_VERIFIER = LengthVerifier("block_verification", block=True)


def _weightings() -> tuple[str, ...]:
    return tuple(WEIGHTINGS)


@dataclass(frozen=True)
class LengthSettings:
    """A verification-length run's own settings (see the module doc; each field's help is its metadata)."""

    verify_with: str = kind_setting(
        "standard_rejection", "What verifies the drafted tokens: standard_rejection, block_verification, a threshold "
        "rule (per token) or a relaxation rule (relaxed block verification), by name (registered, FAMILY:VALUES, "
        "promoted champion) or champion file.", reads_file="verifier's champion file")
    length_weighting: str = kind_setting(
        "call", "How harvested blocks are weighted: call (each block one call of the policy) or position (each block "
        "the text positions its harvest call covered; closer to live decoding on real texts).", choices=_weightings)

    @property
    def verifier(self) -> LengthVerifier:
        """The :class:`LengthVerifier` ``verify_with`` names.

        Raises: InputError (param ``verify_with``) as :func:`heuristics.verifiers.verifier_parts`."""
        from heuristics.verifiers import verifier_parts
        return verifier_from_parts(*verifier_parts(self.verify_with))

    def check(self) -> None:
        """Refuse a verifier that does not resolve, before a search (InputError, param ``verify_with``)."""
        if self.verify_with != LengthSettings.verify_with:
            self.verifier  # noqa: B018 - resolving it is the check


__all__ = ["WEIGHTINGS", "DEFAULT_WEIGHTING", "LengthVerifier", "verifier_from_parts", "STANDARD_VERIFIER",
           "BLOCK_VERIFIER", "LengthSettings"]
