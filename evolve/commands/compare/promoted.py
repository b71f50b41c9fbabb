"""Promoted champions in a comparison: each goes where its run's dataset is.

A champion promoted into the champions directory (``python -m evolve promote``) enters every comparison by default. A
policy evolved on other texts, priced under this comparison's cost file, would lead its headroom lines as if it were a
champion of this dataset; so a promoted champion enters only the comparisons of the dataset its run read (or of a
subset of it), and elsewhere is left out with a note naming the ``--champion`` option that compares it anyway.
"""
from __future__ import annotations

import os
from pathlib import Path

from evolve.report.compare.rows import ComparedRule
from heuristics import champions


def own_data_entries(entries: list[ComparedRule], data_dir: str | os.PathLike,
                     champions_dir: str | os.PathLike | None = None) -> tuple[list[ComparedRule], list[str]]:
    """(entries, notes): the promoted champions (those of the champions directory, not ``--champion`` files) of
    ``entries`` kept only where their run read ``data_dir`` or a dataset it is a subset of
    (:func:`evolve.commands.run_context.differing_file`; a champion file recording no dataset is kept); each other
    one left out with a note: a policy evolved on other texts, priced under this comparison's costs, is no row of this
    dataset's comparison (give its file with ``--champion`` to compare it here all the same)."""
    from evolve.commands.run_context import differing_file, run_context

    cdir = Path(champions_dir) if champions_dir is not None else Path(champions.champions_dir())
    promoted = [e for e in entries if e.role == "champion" and Path(e.origin) == cdir]
    paths = {c.name: c.path for c in champions.promoted_champions(cdir)} if promoted else {}
    kept, notes = [], []
    for entry in entries:
        source = paths.get(entry.rule.name) if entry in promoted else None
        if source is None:
            kept.append(entry)
            continue
        context = run_context(source)
        if context.sha256 and differing_file(data_dir, context) is not None:
            notes.append(f"left out promoted champion {entry.rule.name} ({source}): its run read "
                         f"{context.data_dir or 'another dataset'}, not {data_dir} (give --champion {source} to "
                         f"compare it here)")
            continue
        kept.append(entry)
    return kept, notes


__all__ = ["own_data_entries"]
