"""What verifies the drafts a verification-length policy sends, by name (the ``verify_with`` setting).

The standard rule (default, ``standard_rejection``), ``block_verification`` (Sun et al. 2024, arXiv
2403.10444), any threshold rule (a per-token acceptance rule, lossless or not) or a relaxation rule
(relaxed block verification against (1 - w) p + w q), by name as ``--rule`` takes it or by champion
file. The evaluator's and the live decoder's verifiers are built from :func:`verifier_parts`.
"""
from __future__ import annotations

from pathlib import Path

from evolve.errors import InputError
from evolve.kinds.registry import KINDS, program_kind
from heuristics.champions import load_champion
from heuristics.contract import Rule
from heuristics.length_policies import BLOCK_VERIFIER_NAME, STANDARD_VERIFIER_NAME
from heuristics.registry import get_rule


def verifier_parts(spec: str | None) -> tuple[str, Rule | None, bool]:
    """What ``spec`` names as the verifier of a policy's drafts: (label, rule or None, block).

    ``spec``: None or ``standard_rejection`` (the standard rule: no rule, per token), ``block_verification``
    (no rule, block), a champion file (``*.json``) or a rule name as ``--rule`` takes it (registered, family
    member, promoted champion): a threshold rule verifies per token, a relaxation rule by relaxed block
    verification (block True).

    Raises: InputError (param ``verify_with``) for an unknown name, an unreadable champion file or a rule of
    another kind.
    """
    if spec is None or spec == STANDARD_VERIFIER_NAME:
        return STANDARD_VERIFIER_NAME, None, False
    if spec == BLOCK_VERIFIER_NAME:
        return BLOCK_VERIFIER_NAME, None, True
    try:
        if spec.endswith(".json"):
            path = Path(spec)
            if not path.is_file():
                raise InputError(f"{spec}: no such champion file")
            rule = load_champion(path)
        else:
            rule = get_rule(spec, champions=True)
    except InputError as exc:
        raise InputError(str(exc), param="verify_with") from None
    verifies = program_kind(rule.kind).verifies  # ProgramKind.verifies: "token", "block" or "" (it cannot)
    if not verifies:
        kinds = ", ".join(f"a {k.name} rule ({k.verifies})" for k in KINDS.values() if k.verifies)
        raise InputError(f"'{spec}' is a {rule.kind} rule; the drafts are verified by {kinds}, "
                         f"{STANDARD_VERIFIER_NAME} or {BLOCK_VERIFIER_NAME}", param="verify_with")
    return rule.name, rule, verifies == "block"


__all__ = ["verifier_parts"]
