"""Record layouts and work-unit sizes shared by the compiled kernels and the Python side.

Record layouts
    A *record* is a small float or int array whose entries have fixed meanings
    (the counts of one program, one instruction of register code). Its layout is
    written once, as an :class:`enum.IntEnum` whose members are the field
    offsets 0, 1, ..., k-1 in order, and checked by the :func:`record_layout`
    decorator. Both sides index with the members, ``counts[Count.ACCEPT]``:
    Numba types a global IntEnum member as a compile-time constant in nopython
    code (no lookup at run time, and ``cache=True`` keeps working), and in
    Python an IntEnum member is an ``int`` (in hot Python loops fetch several
    fields with one ``operator.itemgetter`` built from the members: a member
    lookup costs about 0.1 us). :func:`record_size` is the record's length;
    bound to a module-level name it is a compile-time constant in kernels too.
    When a record's leading fields are used on their own, name that prefix
    length once, next to the enum, from the last member it covers (see
    :data:`N_FITNESS_COUNTS`). Nothing else may repeat an offset as a number.

    To define a new layout (any module can import this one)::

        @record_layout
        class Row(IntEnum):
            PROB = 0
            DEPTH = 1
        ROW_SIZE = record_size(Row)

        @njit(cache=True)
        def f(rows):
            return rows[Row.DEPTH, 0]

Work units
    :data:`TILE` tokens are processed per instruction (registers are
    TILE-long rows that stay in the L1/L2 caches); :data:`CHUNK` tokens form
    one work item handed to a thread (boundaries moved to speculation-block
    starts by :func:`evolve.eval.fastpath.scheduler.chunk_bounds`).
"""
from __future__ import annotations

from enum import IntEnum

#: Tokens per register tile: every instruction loops over one tile; registers are TILE-long rows.
TILE = 512
#: Target tokens per work item (a chunk); boundaries are moved to speculation-block starts.
CHUNK = 4096


def record_layout(layout: type[IntEnum]) -> type[IntEnum]:
    """Class decorator: check that an IntEnum's members are the offsets 0, 1, ..., k-1 in order.

    Raises: TypeError for a class that is not an IntEnum; ValueError for a gap,
    a repeated value or members out of order (aliases included).
    """
    if not (isinstance(layout, type) and issubclass(layout, IntEnum)):
        raise TypeError(f"record_layout expects an IntEnum subclass, got {layout!r}")
    values = [int(v) for v in layout.__members__.values()]
    if values != list(range(len(values))):
        raise ValueError(f"{layout.__name__}: field offsets must be 0..{len(values) - 1} in order, got {values}")
    return layout


def record_size(layout: type[IntEnum]) -> int:
    """Number of fields of a :func:`record_layout` (the record's length)."""
    return len(layout)


@record_layout
class Count(IntEnum):
    """The counts of one rule over a set of tokens: float64 (:data:`N_COUNTS`,).

    tau is the threshold after NaN/inf -> 0 and clamping to [0, 1]; r =
    min(1, p/q) is the standard rule's threshold; u the token's rand_value.
    Integer counts are exact in float64 up to 2**53 tokens.
    """

    #: tokens accepted, u < tau
    ACCEPT = 0
    #: accepted although the standard rule rejects (u >= r)
    FALSE_ACCEPT = 1
    #: rejected although the standard rule accepts (u < r)
    FALSE_REJECT = 2
    #: thresholds that were NaN or infinite
    INVALID = 3
    #: sum of tau
    SUM_TAU = 4
    #: sum of max(0, tau - r), the expected total-variation damage
    SUM_TV = 5
    #: sum of max(0, r - tau), the expected false rejections
    SUM_EXPECTED_FR = 6
    #: speculation blocks (only when block metrics are requested, gamma > 0)
    BLOCKS = 7
    #: sum over blocks of the expected tokens per target call, 1 + sum_{k<=gamma} prod_{i<=k} tau_i
    SUM_TOKENS = 8
    #: sum over blocks of the expected TV, sum_{k<=gamma} prod_{i<k} tau_i * max(0, tau_k - r_k)
    SUM_BLOCK_TV = 9


#: Length of a counts record.
N_COUNTS = record_size(Count)
#: The leading counts the acceptance-quality fitness and the expected metrics need (ACCEPT..SUM_EXPECTED_FR).
N_FITNESS_COUNTS = Count.SUM_EXPECTED_FR + 1


@record_layout
class Instr(IntEnum):
    """One instruction of register code: int32 (:data:`WIDTH`,).

    Operands are encoded as described in :mod:`evolve.eval.fastpath.lowering`; unused
    operands (an operator of arity < 4) are 0.
    """

    #: opcode (:class:`evolve.gp.primitives.Op`)
    OPCODE = 0
    #: destination register (a row of the item's buffer)
    DEST = 1
    #: first operand
    ARG0 = 2
    #: second operand
    ARG1 = 3
    #: third operand
    ARG2 = 4
    #: fourth operand
    ARG3 = 5


#: Width of one register-code instruction (int32 entries).
WIDTH = record_size(Instr)
