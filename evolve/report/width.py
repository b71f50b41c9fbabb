"""Plain-text output that fits 100 columns: prose lines wrapped, tables too wide split into column groups.

Every command's ``table`` output passes through :func:`fit_width` before it is printed or written: a line of prose
(a caption, a footer, a legend, a verdict) longer than :data:`WIDTH` is wrapped at spaces (:mod:`textwrap`; a
single word longer than the width, such as a long path, stays whole on its own line), and a table whose rule line
(dashes under the header, one run of dashes per column, ``"-----  ---  ------"``) is wider than :data:`WIDTH` is
cut into several tables of consecutive columns, one under the other, each repeating the key columns (the first
column and the text columns right after it, such as a rule's name and setting). The
columns are found from the rule line alone, so any table laid out that way (cells padded to the column's width,
two spaces between columns) is narrowed without knowing its columns. Every table's measured cells show a non-finite
number as ``n/a`` (:func:`evolve.report.finite.finite_row`). Other text (JSON, CSV, Markdown) is not passed through.
"""
from __future__ import annotations

import re
import textwrap

from evolve.report.finite import finite_row

#: Columns every printed line fits in.
WIDTH = 100
#: Largest share of the width the repeated key columns may take.
KEY_SHARE = 0.5
_WORD = re.compile(r"[A-Za-z]{2,}")
_RULE = re.compile(r"^ *-+( +-+)+ *$|^ *-{3,} *$")


def _spans(rule: str) -> list[tuple[int, int]]:
    """(start, end) of each run of dashes of a rule line."""
    return [m.span() for m in re.finditer(r"-+", rule)]


def _is_rule(line: str) -> bool:
    return bool(_RULE.match(line))


def _cut(line: str, spans: list[tuple[int, int]], group: list[int]) -> str:
    """The cells of ``line`` in the columns ``group`` (indices into ``spans``), two spaces apart."""
    cells = []
    for i in group:
        start = spans[i][0]
        end = spans[i + 1][0] if i + 1 < len(spans) else max(len(line), spans[i][1])
        cells.append(line[start:end].rstrip().ljust(spans[i][1] - start) if i + 1 < len(spans)
                     else line[start:end].rstrip())
    return "  ".join(cells).rstrip()


def _key_columns(block: list[str], spans: list[tuple[int, int]], width: int) -> int:
    """How many leading columns every group repeats: the first, and the text columns right after it (most cells
    holding a word), at most :data:`KEY_SHARE` of the width together."""
    rows = [line for line in block[2:] if line.strip() and not _is_rule(line)]
    count, used = 1, spans[0][1] - spans[0][0]
    for i in range(1, len(spans) - 1):
        w = spans[i][1] - spans[i][0]
        cells = [line[spans[i][0]:spans[i][1]] for line in rows]
        words = sum(bool(_WORD.search(c)) for c in cells)
        if not cells or 2 * words <= len(cells) or used + 2 + w > KEY_SHARE * width:
            break
        count, used = count + 1, used + 2 + w
    return count


def _groups(spans: list[tuple[int, int]], keys: int, width: int) -> list[list[int]]:
    """Column groups, each the ``keys`` key columns and as many consecutive columns as fit in ``width``."""
    key = list(range(keys))
    used_key = spans[keys - 1][1] - spans[0][0]
    groups: list[list[int]] = []
    current, used = list(key), used_key
    for i in range(keys, len(spans)):
        w = spans[i][1] - spans[i][0]
        if len(current) > keys and used + 2 + w > width:
            groups.append(current)
            current, used = list(key), used_key
        current.append(i)
        used += 2 + w
    groups.append(current)
    return groups


def _narrow(block: list[str], rule: str, width: int) -> list[str]:
    """A table (``block``: its lines, header(s), rules and rows) split into column groups of at most ``width``."""
    spans = _spans(rule)
    if len(spans) < 2:
        return block
    out: list[str] = []
    for n, group in enumerate(_groups(spans, _key_columns(block, spans, width), width)):
        if n:
            out.append("")
        out += [_cut(line, spans, group) for line in block]
    return out


def fit_width(text: str, width: int = WIDTH) -> str:
    """``text`` (a command's plain-text output) with every line at most ``width`` columns (module doc), where it
    can be: a word longer than ``width`` stays whole."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        # a table: a header line, then a rule of per-column dashes (narrowed when wider than the width)
        if i + 1 < len(lines) and _is_rule(lines[i + 1]) and len(_spans(lines[i + 1])) > 1:
            rule = lines[i + 1]
            j = i + 2
            while j < len(lines) and lines[j].strip() and (not _is_rule(lines[j]) or _spans(lines[j]) == _spans(rule)):
                j += 1
            block = [finite_row(line, _spans(rule)) for line in lines[i:j]]  # no NaN or infinity in a table
            out += _narrow(block, rule, width) if len(rule.rstrip()) > width else block
            i = j
            continue
        if len(line) > width and not _is_rule(line):
            indent = re.match(r" *", line).group(0)
            out += textwrap.wrap(line, width=width, subsequent_indent=indent + "  " if indent else "",
                                 break_long_words=False, break_on_hyphens=False) or [line]
        else:
            out.append(line)
        i += 1
    return "\n".join(out)


__all__ = ["WIDTH", "fit_width"]
