"""Trace schema, version 1: one row per drafted token.

Required columns (the record of the independent-features model, :mod:`evolve.traces.synth.independent`):

=================  =======  ==========================================================
column             dtype    meaning
=================  =======  ==========================================================
seq_id             int64    sequence the token belongs to
position           int64    0-based index of the token in its sequence
draft_prob         float64  q(x), in (0, 1]
target_prob        float64  p(x), in [0, 1]
draft_entropy      float64  H(q) in nats, >= 0
target_entropy     float64  H(p) in nats, >= 0
top_token_match    bool     argmax q == argmax p
rand_value         float64  u ~ U[0, 1) of the token's acceptance test
baseline_accepts   bool     rand_value < min(1, target_prob / draft_prob)
=================  =======  ==========================================================

Optional columns, written by generators that know whole distributions:
``draft_index`` (int64, depth inside the speculation block, 0..gamma-1; rows of a
block are consecutive), ``draft_top_prob`` and ``target_top_prob`` (float64,
max_v q(v) and max_v p(v)), ``overlap`` (float64, sum_v min(p(v), q(v))),
``block_residual_mass`` (float64 in [0, 1]: block verification's residual mass
sum_v max(0, P p'(v) - q'(v)) with P the block weight after the record's token
and p', q' the next depth's distributions; NaN, and only there, at a block's last
depth; :mod:`evolve.verification.block`), ``target_rank`` (int64, rank of the
drafted token under p, 0 = arg max, tied tokens share a rank) and
``block_residual_phi`` (a list of :data:`RESIDUAL_PHI_POINTS` float64 per record, in
[0, 1]: phi(a) = sum_v max(0, a p'(v) - q'(v)) of the next depth's (p', q') at
a = k / RESIDUAL_PHI_POINTS, k = 1..RESIDUAL_PHI_POINTS, the residual masses of
relaxed block verification; all NaN, and only there, at a block's last depth; Parquet
list<double>, a JSON array or null).

Optional columns of one drafter (:data:`LOOKUP_COLUMNS`), written by harvests with n-gram prompt lookup
(:mod:`evolve.engine.ngram`): ``lookup_len`` (int64 >= 1, the length of the matched n-gram) and
``lookup_freq`` (float64 in (0, 1], the fraction of the earlier occurrences of the matched n-gram followed
by the block's earlier drafts that the token follows).

Optional columns of the suffix-decoding drafter (:data:`SUFFIX_COLUMNS`, :mod:`evolve.engine.suffix`), the same for
every token of a block where the column describes the draft: ``suffix_match_len`` (int64 >= 0, the length of the
context suffix the draft continues), ``suffix_prob`` (float64 in (0, 1], the token's estimated probability after the
block's earlier drafts), ``suffix_cumprob`` (float64 in (0, 1], their product up to the token), ``suffix_score``
(float64 >= 0, the draft's summed ``suffix_cumprob``) and ``suffix_from_cache`` (int64 0 or 1, whether the draft
continues an earlier response rather than the text's own prompt and response).

Optional columns of the text (:data:`TEXT_COLUMNS`), written by harvests of a structured prompts file
(Spec-Bench-style JSON Lines, :mod:`evolve.harvest.prompts`), the same on every record of a text:
``category`` (a non-empty string, the question's category, e.g. Spec-Bench's ``writing`` or ``rag``)
and ``question_id`` (int64, the question's id in the file). A dataset without them is valid.

:func:`validate` checks a whole split and returns it with canonical dtypes, or
raises :class:`evolve.errors.InputError` naming the file, the column and the first
offending row. Round-off is tolerated: a value of a column bounded to [0, 1] at most
:data:`ROUNDOFF_TOLERANCE` (1e-9) outside a closed end of the interval is clipped to it,
and one :class:`RoundOffWarning` per split says how many were (the command-line tools
print it as one ``warning: ...`` line); anything further out is refused.

Dtypes: a column must hold its dtype above (``block_residual_phi``: lists of float64);
another one (``uint64``, ``float32``, ``int32``, lists of ``float32`` ...) is refused naming the
column, the dtype found and the one expected, since converting it could change values
(2**64 - 1 would read as -1) or break the consistency rules by float32 rounding. The only
conversions made are exact ones that JSON needs (it has numbers, not dtypes): integers in a
float column, whole float64 numbers in an integer column, 0/1 in a boolean column; a column of
Python objects (JSON with mixed types) is checked value by value.

``block_residual_phi`` is checked for what it means (:func:`evolve.traces.phi_records.check_phi_records`): every
record is non-decreasing and convex in a, with slopes in [0, 1] (phi(0) = 0 included); with
``draft_index``, it is NaN exactly on a block's last record; with ``overlap`` too, its value
at a = 1 is 1 - ``overlap`` of the next record. Each comparison allows
:data:`PHI_TOLERANCE`.
"""
from __future__ import annotations

import difflib
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from evolve.errors import InputError, printable
from evolve.traces.phi_records import check_phi_records
from evolve.traces.order import in_reading_order
from evolve.verification.block import PHI_POINTS
from evolve.verification.tokenwise import standard_threshold

SCHEMA_VERSION = 1
#: Values per record of the list column ``block_residual_phi``: the grid of :mod:`evolve.verification.block`.
RESIDUAL_PHI_POINTS = PHI_POINTS

#: Slack allowed when comparing a drafted token's probability with the top probability.
TOP_PROB_TOLERANCE = 1e-9
#: How far a value of a column bounded to [0, 1] may lie outside a closed end of the interval and
#: still be accepted as round-off (e.g. an overlap summed over 49k float64 terms, 1.0000000000000007):
#: such values are clipped to the end and counted in one :class:`RoundOffWarning` per split.
ROUNDOFF_TOLERANCE = 1e-9
#: Slack of every check of ``block_residual_phi`` (monotone, convex, slopes in [0, 1], phi(1) = 1 - overlap of
#: the next record). Every writer computes phi and overlap in float64 from the same float64 (p, q)
#: (:mod:`evolve.verification.block`): their round-off is at most about V * 2**-53 (2e-11 for a
#: 150k-token vocabulary; 1e-15 on the test fixtures), and the values are stored as float64 (float32
#: storage is refused as a dtype), so the slack of the round-off clipping, 1e-9, covers it with room to
#: spare and is still far below anything that changes a verdict (linear interpolation alone is off by up
#: to 1/128).
PHI_TOLERANCE = ROUNDOFF_TOLERANCE
#: The dtype of each value type of column (a list column holds lists of the float dtype; a string column is
#: a numpy object array of Python strings).
DTYPES = {"int": "int64", "float": "float64", "bool": "bool", "str": "object"}


class RoundOffWarning(UserWarning):
    """Values of [0, 1]-bounded columns within :data:`ROUNDOFF_TOLERANCE` outside the interval were
    clipped to it; the message is one line naming the file, how many values and which columns."""


@dataclass(frozen=True)
class Column:
    """One schema column: name, value type (``int``, ``float``, ``bool`` or ``str``) and valid range."""

    name: str
    value_type: str
    required: bool
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    doc: str = ""
    #: NaN is a valid value (``block_residual_mass`` at a block's last depth).
    nan_ok: bool = False
    #: Values per record of a list column (0: one value); a list column's record is all NaN or all finite.
    length: int = 0

    def range_text(self) -> str:
        """The valid range in interval notation, e.g. ``(0, 1]``."""
        lo = "-inf" if self.low is None else f"{self.low:g}"
        hi = "inf" if self.high is None else f"{self.high:g}"
        return f"{'(' if self.low_open or self.low is None else '['}{lo}, {hi}{')' if self.high_open or self.high is None else ']'}"


COLUMNS: tuple[Column, ...] = (
    Column("seq_id", "int", True, 0, None, doc="sequence id"),
    Column("position", "int", True, 0, None, doc="0-based token index in its sequence"),
    Column("draft_prob", "float", True, 0.0, 1.0, low_open=True, doc="q(x)"),
    Column("target_prob", "float", True, 0.0, 1.0, doc="p(x)"),
    Column("draft_entropy", "float", True, 0.0, None, doc="H(q), nats"),
    Column("target_entropy", "float", True, 0.0, None, doc="H(p), nats"),
    Column("top_token_match", "bool", True, doc="argmax q == argmax p"),
    Column("rand_value", "float", True, 0.0, 1.0, high_open=True, doc="u ~ U[0, 1)"),
    Column("baseline_accepts", "bool", True, doc="rand_value < min(1, p/q)"),
    Column("draft_index", "int", False, 0, None, doc="depth inside the block, 0..gamma-1"),
    Column("draft_top_prob", "float", False, 0.0, 1.0, low_open=True, doc="max_v q(v)"),
    Column("target_top_prob", "float", False, 0.0, 1.0, low_open=True, doc="max_v p(v)"),
    Column("overlap", "float", False, 0.0, 1.0, doc="sum_v min(p(v), q(v))"),
    Column("block_residual_mass", "float", False, 0.0, 1.0, nan_ok=True,
           doc="sum_v max(0, P p'(v) - q'(v)) with P the block weight after x, p', q' the next depth's; "
               "NaN at a block's last depth"),
    Column("target_rank", "int", False, 0, None, doc="rank of x under p, 0 = argmax (ties share a rank)"),
    Column("block_residual_phi", "float", False, 0.0, 1.0, nan_ok=True, length=RESIDUAL_PHI_POINTS,
           doc=f"list of {RESIDUAL_PHI_POINTS} float64: sum_v max(0, a p'(v) - q'(v)) at a = k/{RESIDUAL_PHI_POINTS}, "
               "k = 1..32, p', q' the next depth's; all NaN at a block's last depth"),
    Column("lookup_len", "int", False, 1, None, doc="prompt lookup: length n of the matched n-gram"),
    Column("lookup_freq", "float", False, 0.0, 1.0, low_open=True,
           doc="prompt lookup: fraction of the earlier occurrences of the matched n-gram and the block's earlier "
               "drafts that this token follows"),
    Column("suffix_match_len", "int", False, 0, None,
           doc="suffix decoding: length of the context suffix the block's draft continues (arctic-inference's "
               "match length, below the tree depth)"),
    Column("suffix_prob", "float", False, 0.0, 1.0, low_open=True,
           doc="suffix decoding: the suffix tree's estimated probability of this token after the block's earlier "
               "drafts"),
    Column("suffix_cumprob", "float", False, 0.0, 1.0, low_open=True,
           doc="suffix decoding: the estimated probability that the block's drafts up to this one all continue the "
               "text (the product of suffix_prob)"),
    Column("suffix_score", "float", False, 0.0, None,
           doc="suffix decoding: the draft's score, the sum of suffix_cumprob over the whole draft"),
    Column("suffix_from_cache", "int", False, 0, 1,
           doc="suffix decoding: 1 where the draft continues an earlier response (the global cache), 0 where it "
               "continues this text's own prompt and response"),
    Column("category", "str", False, doc="the text's question category (structured prompts file)"),
    Column("question_id", "int", False, doc="the text's question id (structured prompts file)"),
)
#: Optional columns only the prompt-lookup drafter writes (:mod:`evolve.engine.ngram`); the other generators write
#: every other optional column.
LOOKUP_COLUMNS: tuple[str, ...] = ("lookup_len", "lookup_freq")
#: Optional columns only the suffix-decoding drafter writes (:mod:`evolve.engine.suffix`).
SUFFIX_COLUMNS: tuple[str, ...] = ("suffix_match_len", "suffix_prob", "suffix_cumprob", "suffix_score",
                                   "suffix_from_cache")
#: Optional columns describing a record's text (its question), written by harvests of a structured prompts file.
TEXT_COLUMNS: tuple[str, ...] = ("category", "question_id")
COLUMN_BY_NAME = {c.name: c for c in COLUMNS}
REQUIRED_COLUMNS: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.required)
OPTIONAL_COLUMNS: tuple[str, ...] = tuple(c.name for c in COLUMNS if not c.required)


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _bad(source: str, column: str, row: int, value, why: str) -> InputError:
    text = repr(_py(value))  # plain Python numbers, not np.float64(...)
    if len(text) > 40:
        text = f"{text[:20]}... ({len(text)} characters)"
    return InputError(f"{source}: column '{column}', row {row}: {why} (value {text})")


def _wrong_dtype(source: str, col: Column, found, note: str = "") -> InputError:
    """The refusal of a column stored with another dtype than the schema's (``found``)."""
    expected = f"list<{DTYPES[col.value_type]}>" if col.length else DTYPES[col.value_type]
    return InputError(f"{source}: column '{col.name}': dtype {found}, expected {expected}{note}")


def _coerce(df: pd.DataFrame, col: Column, source: str) -> np.ndarray:
    series = df[col.name]
    values = series.to_numpy()
    if col.length:
        return _coerce_list(values, col, source)
    if col.value_type == "str":
        return _coerce_str(values, col, source)
    if values.dtype.kind in "iuf" and values.dtype not in (np.int64, np.float64):
        note = ""
        if values.dtype.kind == "u" and values.dtype.itemsize == 8 and (values > np.iinfo(np.int64).max).any():
            i = _first(values > np.iinfo(np.int64).max)
            note = f"; row {i} holds {values[i].item()}, beyond the int64 range"
        raise _wrong_dtype(source, col, values.dtype, note)
    if col.value_type == "bool":
        if values.dtype == bool:
            return values
        if values.dtype == np.int64:  # 0/1, as JSON may write booleans
            bad = (values != 0) & (values != 1)
            if bad.any():
                i = _first(bad)
                raise _bad(source, col.name, i, values[i].item(), "expected a boolean (true/false or 0/1)")
            return values.astype(bool)
        if values.dtype == np.float64:
            raise _wrong_dtype(source, col, values.dtype)
        i = _first_non_type(values, (bool, np.bool_))
        raise _bad(source, col.name, i, _py(values[i]), f"expected a boolean, column has dtype {series.dtype}")
    if col.value_type == "int":
        if values.dtype == np.int64:
            return values
        if values.dtype == np.float64:  # whole numbers written as floats (JSON's 3.0)
            bad = ~np.isfinite(values) | (values != np.round(values))
            if bad.any():
                i = _first(bad)
                raise _bad(source, col.name, i, values[i].item(), "expected an integer")
            bad = (values < -2.0 ** 63) | (values >= 2.0 ** 63)
            if bad.any():
                i = _first(bad)
                raise _bad(source, col.name, i, values[i].item(), "integer outside the 64-bit range")
            return values.astype(np.int64)
        i = _first_non_type(values, (int, np.integer))
        if isinstance(values[i], int) and not isinstance(values[i], bool):
            raise _bad(source, col.name, i, values[i], "integer outside the 64-bit range")
        raise _bad(source, col.name, i, _py(values[i]), f"expected an integer, column has dtype {series.dtype}")
    # float
    if col.nan_ok and values.dtype == object and not any(isinstance(v, (bool, np.bool_)) for v in values):
        values = np.array([np.nan if v is None else v for v in values])  # JSON null is NaN here
    if values.dtype in (np.float64, np.int64):  # integers: JSON's 1 for 1.0
        out = values.astype(np.float64, copy=False)
        bad = np.isinf(out) if col.nan_ok else ~np.isfinite(out)
        if bad.any():
            i = _first(bad)
            raise _bad(source, col.name, i, out[i].item(), "infinite" if col.nan_ok else "NaN or infinite")
        return out
    i = _first_non_type(values, (float, int, np.floating, np.integer))
    if isinstance(values[i], (int, float)) and not isinstance(values[i], bool):  # only numbers, some huge
        try:
            return _coerce(pd.DataFrame({col.name: [float(v) for v in values]}), col, source)
        except OverflowError:
            i = next(k for k, v in enumerate(values) if abs(v) > 1e308)
            raise _bad(source, col.name, i, values[i], "number too large for a float") from None
    raise _bad(source, col.name, i, _py(values[i]), f"expected a number, column has dtype {series.dtype}")


def _coerce_str(values: np.ndarray, col: Column, source: str) -> np.ndarray:
    """A string column as a numpy object array of Python strings, each non-empty."""
    out = np.asarray(values, dtype=object)
    for i, v in enumerate(out):
        if not isinstance(v, str) or not v:
            raise _bad(source, col.name, i, _py(v), "expected a non-empty string")
    return out


def _coerce_list(values: np.ndarray, col: Column, source: str) -> np.ndarray:
    """A list column as float64 (n, col.length): each record a list of ``col.length`` numbers, or null (NaN)."""
    n, k = len(values), col.length
    if n and all(isinstance(v, np.ndarray) and v.dtype == np.float64 and v.shape == (k,) for v in values):
        out = np.stack(values)  # as read from Parquet
    else:
        out = np.empty((n, k))
        for i, v in enumerate(values):
            if v is None or (isinstance(v, float) and v != v):
                out[i] = np.nan
                continue
            if isinstance(v, np.ndarray) and v.dtype.kind in "iufb" and v.dtype != np.float64:
                raise _wrong_dtype(source, col, f"list<{v.dtype}>")  # a typed list column (Parquet)
            items = list(v) if isinstance(v, (list, tuple, np.ndarray)) else None
            if items is None or len(items) != k or not all(
                    isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))
                    for x in items):
                found = f", found {len(items)} values" if items is not None and len(items) != k else ""
                raise _bad(source, col.name, i, v, f"expected a list of {k} numbers (or null){found}")
            try:
                out[i] = np.asarray(items, dtype=np.float64)
            except OverflowError:
                raise _bad(source, col.name, i, v, "number too large for a float") from None
    nan = np.isnan(out)
    bad = (nan.any(axis=1) & ~nan.all(axis=1)) | np.isinf(out).any(axis=1)
    if not col.nan_ok:
        bad |= nan.any(axis=1)
    if bad.any():
        i = _first(bad)
        raise _bad(source, col.name, i, out[i].tolist(), "a record must be all finite numbers"
                   + (" or all NaN (null)" if col.nan_ok else ""))
    return out


def _py(value):
    """``value`` as plain Python (a numpy scalar as a number, an array or a sequence as a list of them)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_py(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def _first_non_type(values: np.ndarray, types: tuple) -> int:
    """Index of the first value that is not an instance of ``types`` (booleans count only as bool),
    or else of the first integer outside the int64 range (a column pandas kept as objects)."""
    wants_bool = bool in types
    for i, v in enumerate(values):
        is_bool = isinstance(v, (bool, np.bool_))
        if is_bool != wants_bool or not isinstance(v, types):
            return i
    for i, v in enumerate(values):
        if isinstance(v, int) and not -2**63 <= v < 2**63:
            return i
    return 0


def _clip_roundoff(values: np.ndarray, col: Column, clipped: dict[str, int]) -> np.ndarray:
    """``values`` with round-off outside [0, 1] clipped (a copy if anything changes).

    Only columns bounded to [0, 1] and only their closed ends: a value in
    [-ROUNDOFF_TOLERANCE, 0) becomes 0 and one in (1, 1 + ROUNDOFF_TOLERANCE] becomes 1.
    An open end (``draft_prob`` > 0, ``rand_value`` < 1) is never clipped onto, since the
    clipped value would still be invalid. The number clipped is added to ``clipped[col.name]``.
    """
    if col.low != 0.0 or col.high != 1.0:
        return values
    fix_low = np.zeros(values.shape, dtype=bool) if col.low_open else \
        (values < 0.0) & (values >= -ROUNDOFF_TOLERANCE)
    fix_high = np.zeros(values.shape, dtype=bool) if col.high_open else \
        (values > 1.0) & (values <= 1.0 + ROUNDOFF_TOLERANCE)
    n = int(np.count_nonzero(fix_low) + np.count_nonzero(fix_high))
    if n == 0:
        return values
    clipped[col.name] = clipped.get(col.name, 0) + n
    return np.where(fix_low, 0.0, np.where(fix_high, 1.0, values))


def roundoff_note(source: str, clipped: dict[str, int]) -> str:
    """The one-line message of a :class:`RoundOffWarning`: file, total count and count per column."""
    total = sum(clipped.values())
    per_column = ", ".join(f"'{name}' {n}" for name, n in clipped.items())
    tolerance = f"{ROUNDOFF_TOLERANCE:g}".replace("e-0", "e-")
    return (f"{source}: clipped {total} value{'s' if total != 1 else ''} lying within {tolerance} outside "
            f"[0, 1] to the interval as round-off (per column: {per_column})")


def _check_range(values: np.ndarray, col: Column, source: str) -> None:
    bad = np.zeros(values.shape, dtype=bool)
    if col.low is not None:
        bad |= values <= col.low if col.low_open else values < col.low
    if col.high is not None:
        bad |= values >= col.high if col.high_open else values > col.high
    if bad.any():
        if values.ndim == 2:  # a list column: name the record
            i = _first(bad.any(axis=1))
            raise _bad(source, col.name, i, values[i].tolist(), f"a value outside {col.range_text()}")
        i = _first(bad)
        raise _bad(source, col.name, i, values[i].item(), f"outside {col.range_text()}")


def validate(df: pd.DataFrame, source: str) -> dict[str, np.ndarray]:
    """Validate one split and return its schema columns with canonical dtypes.

    Args:
        df: the split as read from disk; extra columns are ignored unless their
            name is a near-miss of a schema column (then it is reported as misspelt).
        source: file name used in error messages.

    Returns:
        dict from column name to a 1-D numpy array (int64, float64 or bool) of
        length n, holding every required column and the optional ones present, the rows in reading order (text
        by text, each text's blocks in drafting order: :mod:`evolve.traces.order`; the file's order when it is
        that already).
        Values of [0, 1]-bounded columns within ROUNDOFF_TOLERANCE outside a closed
        end are clipped to it (in a copy; ``df`` is not changed), with one
        :class:`RoundOffWarning` naming ``source``, the count and the columns.

    Raises:
        InputError: empty split, missing or misspelt column, wrong dtype, NaN or
            infinity, value out of range, ``baseline_accepts`` inconsistent with
            ``rand_value < min(1, target_prob/draft_prob)``, a top probability
            below the drafted token's, ``draft_index`` not counting 0, 1, ...
            inside a block, or a ``block_residual_phi`` record that is not what
            phi is (:func:`check_phi_records`). The message names the first offending
            row (a wrong dtype: the column, the dtype found and the one expected).
    """
    if len(df) == 0:
        raise InputError(f"{source}: the split is empty (no rows)")
    present = set(map(str, df.columns))
    for name in present - set(COLUMN_BY_NAME):
        close = difflib.get_close_matches(name, list(COLUMN_BY_NAME), n=1, cutoff=0.8)
        if close and close[0] not in present:
            raise InputError(f"{source}: unknown column '{printable(name)}' (did you mean '{close[0]}'?)")
    missing = [c for c in REQUIRED_COLUMNS if c not in present]
    if missing:
        raise InputError(f"{source}: missing required column '{missing[0]}' "
                         f"(required: {', '.join(REQUIRED_COLUMNS)})")
    cols: dict[str, np.ndarray] = {}
    clipped: dict[str, int] = {}
    for col in COLUMNS:
        if col.name not in present:
            continue
        values = _coerce(df, col, source)
        if col.value_type not in ("bool", "str"):
            values = _clip_roundoff(values, col, clipped)
            _check_range(values, col, source)
        cols[col.name] = values
    _check_consistency(cols, source)
    if clipped:
        warnings.warn(roundoff_note(source, clipped), RoundOffWarning, stacklevel=2)
    return in_reading_order(cols)


def text_columns_of(df: pd.DataFrame, source: str) -> dict[str, np.ndarray]:
    """The text columns (:data:`TEXT_COLUMNS`) ``df`` has, checked as :func:`validate` checks them (``category``
    an object array of non-empty strings, ``question_id`` int64); used for tables other than the records
    (a tree table's rows carry them too). Raises: InputError naming ``source``, the column and the row."""
    return {name: _coerce(df, COLUMN_BY_NAME[name], source) for name in TEXT_COLUMNS if name in df.columns}


def _check_consistency(cols: dict[str, np.ndarray], source: str) -> None:
    r = standard_threshold(cols["target_prob"], cols["draft_prob"])
    expected = cols["rand_value"] < r
    bad = expected != cols["baseline_accepts"]
    if bad.any():
        i = _first(bad)
        raise _bad(source, "baseline_accepts", i, bool(cols["baseline_accepts"][i]),
                   f"inconsistent with rand_value < min(1, target_prob/draft_prob) = {bool(expected[i])}")
    for top, prob in (("draft_top_prob", "draft_prob"), ("target_top_prob", "target_prob")):
        if top in cols:
            bad = cols[top] < cols[prob] - TOP_PROB_TOLERANCE
            if bad.any():
                i = _first(bad)
                raise _bad(source, top, i, cols[top][i].item(), f"below {prob} = {cols[prob][i].item()!r}")
    if "draft_index" in cols:
        d = cols["draft_index"]
        prev = np.concatenate(([-1], d[:-1]))
        same_seq = np.concatenate(([False], cols["seq_id"][1:] == cols["seq_id"][:-1]))
        ok = (d == 0) | (same_seq & (d == prev + 1))
        if not ok.all():
            i = _first(~ok)
            raise _bad(source, "draft_index", i, int(d[i]),
                       "a block's rows must be consecutive with draft_index 0, 1, ... in one sequence")
        if "block_residual_mass" in cols:
            last = np.concatenate((d[1:] == 0, [True]))  # a block's last record: the next row starts a block
            bad = np.isnan(cols["block_residual_mass"]) & ~last
            if bad.any():
                i = _first(bad)
                raise _bad(source, "block_residual_mass", i, float("nan"),
                           "NaN is only valid at a block's last record (the next depth is needed otherwise)")
    if "block_residual_phi" in cols:
        check_phi_records(cols, source, PHI_TOLERANCE)


def derive_seq_id(position: np.ndarray) -> np.ndarray:
    """Sequence ids for records without ``seq_id``: a new sequence starts where position resets.

    Args: ``position`` int64 (n,). Returns int64 (n,), starting at 0.
    """
    position = np.asarray(position)
    if position.size == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.concatenate(([False], position[1:] <= position[:-1]))
    return np.cumsum(starts).astype(np.int64)


def split_stats(cols: dict[str, np.ndarray]) -> dict[str, float]:
    """Summary statistics of one split (as printed by ``generate_data.py`` and kept in metadata).

    Returns a dict of plain floats/ints: tokens, sequences, standard_acceptance
    (mean of ``baseline_accepts``), expected_standard_acceptance (mean of
    min(1, p/q)), top_token_match rate, mean and median entropies in nats, and,
    with ``draft_index``, the expected acceptance at each depth.
    """
    r = standard_threshold(cols["target_prob"], cols["draft_prob"])
    stats: dict = {
        "tokens": int(r.size),
        "sequences": int(np.unique(cols["seq_id"]).size),
        "standard_acceptance": float(np.mean(cols["baseline_accepts"])),
        "expected_standard_acceptance": float(np.mean(r)),
        "top_token_match": float(np.mean(cols["top_token_match"])),
        "mean_draft_entropy": float(np.mean(cols["draft_entropy"])),
        "mean_target_entropy": float(np.mean(cols["target_entropy"])),
        "median_target_entropy": float(np.median(cols["target_entropy"])),
    }
    if "overlap" in cols:
        stats["mean_overlap"] = float(np.mean(cols["overlap"]))
    if "draft_index" in cols:
        d = cols["draft_index"]
        stats["acceptance_by_depth"] = [float(np.mean(r[d == k])) for k in range(int(d.max()) + 1)]
    return stats
