"""The settings of a verification-length run (:class:`LengthSettings`): what verifies the drafts the policy sends
(``verify_with``) and how the harvested blocks are weighted (``length_weighting``). The run configuration holds them
as one field (:attr:`evolve.search.config.RunConfig.kind_settings`); a champion carries them in its provenance.
"""
from __future__ import annotations

from dataclasses import dataclass

from evolve.kinds.base import kind_setting


def _weightings() -> tuple[str, ...]:
    from evolve.kinds.verify_length.eval_policy import WEIGHTINGS
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
    def verifier(self):
        """The :class:`evolve.kinds.verify_length.eval_policy.LengthVerifier` ``verify_with`` names.

        Raises: InputError (param ``verify_with``) as :func:`heuristics.verifiers.verifier_parts`."""
        from evolve.kinds.verify_length.eval_policy import verifier_from_parts
        from heuristics.verifiers import verifier_parts
        return verifier_from_parts(*verifier_parts(self.verify_with))

    def check(self) -> None:
        """Refuse a verifier that does not resolve, before a search (InputError, param ``verify_with``)."""
        if self.verify_with != LengthSettings.verify_with:
            self.verifier  # noqa: B018 - resolving it is the check


__all__ = ["LengthSettings"]
