"""What a command's ``--rule NAME`` names, resolved in one place for every command that runs rules.

A name is ``block_verification`` (lossless block verification, Sun et al. 2024, arXiv 2403.10444:
the verifier :data:`evolve.live.decoding.BLOCK_VERIFICATION`, which has no per-token threshold), or
anything :func:`heuristics.registry.get_rule` resolves with champions: a registered rule, a family
member ``FAMILY:VALUES`` or a promoted champion. The rule keeps its kind of program
(:mod:`evolve.kinds.registry`, ``Rule.kind``); each command then asks the kind for its hook
(:meth:`evolve.kinds.base.ProgramKind.hook`: ``live``, ``simulate``, ...) and refuses a kind without it.
"""
from __future__ import annotations

import os

from evolve.live.decoding import BLOCK_VERIFICATION, BlockVerifier
from heuristics.contract import Rule
from heuristics.registry import get_rule


def rule_named(name: str, champions_dir: str | os.PathLike | None = None) -> Rule | BlockVerifier:
    """The rule or verifier ``name`` names (module doc).

    ``champions_dir``: where promoted champions are read (default: the champions directory).
    Raises: InputError as :func:`heuristics.registry.get_rule` for an unknown name, a bad family
    member or an invalid champion file.
    """
    if name == BLOCK_VERIFICATION.name:
        return BLOCK_VERIFICATION
    return get_rule(name, champions=True, directory=champions_dir)


__all__ = ["rule_named"]
