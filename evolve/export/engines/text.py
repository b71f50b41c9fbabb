"""The text formats engines read: comment headers, one line of shell flags, YAML documents (written as JSON flow
values, which every YAML reader reads), and the check of a per-batch-size schedule before it is written."""
from __future__ import annotations

import json
import shlex
from typing import Any, Mapping

from evolve.errors import InputError
from evolve.export.engines.base import Schedule


def check_schedule(schedule: Schedule) -> Schedule:
    """``schedule`` checked: (start batch size, end batch size, draft length) triples, inclusive ranges starting at
    batch size 1, contiguous and increasing, lengths >= 0. Raises InputError (param ``schedule``) otherwise."""
    rows = tuple(tuple(int(v) for v in row) for row in schedule)
    if not rows or any(len(r) != 3 for r in rows):
        raise InputError("a schedule is a non-empty tuple of (start, end, length) triples", param="schedule")
    expected = 1
    for start, end, length in rows:
        if start != expected or end < start or length < 0:
            raise InputError(f"range ({start}, {end}, {length}) does not continue the schedule at batch size "
                             f"{expected} (ranges are contiguous, inclusive, from 1; lengths >= 0)", param="schedule")
        expected = end + 1
    return rows


def merged(schedule: Schedule) -> Schedule:
    """``schedule`` with neighbouring ranges of one draft length joined (the same lengths at every batch size)."""
    out: list[tuple[int, int, int]] = []
    for start, end, length in schedule:
        if out and out[-1][2] == length:
            out[-1] = (out[-1][0], end, length)
        else:
            out.append((start, end, length))
    return tuple(out)


def header(what: str, checked: str, provenance: Any, setting: Any, notes: list[str], use: str) -> list[str]:
    """The header lines every written file starts with: ``what`` the file is and the engine version it was
    ``checked`` against, the champion's provenance (:class:`evolve.export.engines.base.Provenance`), the ``setting``
    written (its label and note), ``notes`` (what holds under which condition) and the ``use`` line."""
    return [f"{what} (checked against {checked}), written by specdec-evolve (python -m evolve export)",
            *provenance.lines(), f"setting: {setting.label}", *([setting.note] if setting.note else []), *notes, use]


def comment(lines: list[str], mark: str = "#") -> str:
    """``lines`` as comment lines with ``mark`` (each line on its own)."""
    return "\n".join(f"{mark} {line}".rstrip() for line in lines)


def flags(knobs: Mapping[str, Any]) -> str:
    """The command-line flags of ``knobs`` (flag -> value) on one line, each value quoted for a POSIX shell; a flag
    whose value is True is written alone (a switch)."""
    return " ".join(flag if value is True else f"{flag} {shlex.quote(str(value))}" for flag, value in knobs.items())


def yaml_text(header: list[str], mapping: Mapping[str, Any]) -> str:
    """A YAML document: ``header`` as ``#`` comments, then one ``key: value`` line per item with the value written
    as JSON (JSON's flow style is YAML too), so any YAML reader (and :func:`read_yaml_text`) reads it back; an empty
    mapping is written ``{}``."""
    body = "\n".join(f"{key}: {json.dumps(value)}" for key, value in mapping.items()) or "{}"
    return f"{comment(header)}\n{body}\n"


def read_yaml_text(text: str) -> dict[str, Any]:
    """The mapping of a document :func:`yaml_text` wrote (comments skipped). Raises ValueError for another line."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#") or line.strip() == "{}":
            continue
        key, sep, value = line.partition(": ")
        if not sep:
            raise ValueError(f"not a 'key: value' line: {line!r}")
        out[key] = json.loads(value)
    return out


__all__ = ["check_schedule", "merged", "comment", "flags", "yaml_text", "read_yaml_text"]
