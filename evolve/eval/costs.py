"""Cost files: what a target forward and a drafted token cost, so tokens per call become tokens per second.

A speculative step drafts some tokens and runs the target once over T new tokens (the last
accepted token and the L drafted ones: T = L + 1). Its wall time is

    seconds(L, drafted) = target_forward_s(T = L + 1) + drafted * draft_token_s

and plain decoding emits one token per ``plain_token_s`` (by default the T = 1 forward). Over many
steps the throughput is the ratio of expectations (a renewal-reward argument):

    tokens_per_second = E[tokens per call] / E[seconds per call],
    speedup = tokens_per_second * plain_token_s.

The block metrics use the expectations from the records (exact, not sampled): for a fixed draft
length gamma, E[seconds per call] = target_forward_s(gamma + 1) + gamma * draft_token_s.

A cost file is JSON::

    {"target_forward_s": [t1, t2, ...],   # seconds of one target forward over T = 1, 2, ... new tokens
     "draft_token_s": d,                  # seconds per drafted token
     "plain_token_s": p,                  # optional: seconds per token of plain decoding (default t1)
     "batch_forward_s": {"tokens": [1, 8, 64], "seconds": [s1, s8, s64]},  # optional: a step over n new
                                          # tokens in total across a batch of requests (concurrency)
     "context_tokens": n0,                # optional: tokens of context the figures above were timed after
     "long_context": {"context_tokens": n1, "target_forward_s": [...], "plain_token_s": p1},
                                          # optional: the same figures timed after n1 > n0 tokens of context
     ...}                                 # other keys (machine, engine, threads) are kept

A forward's time grows with the context it attends to (inside llama-cpp-python, SmolLM2-135M on a 2-core CPU: about
5 us more per context token for T = 1 and 21 us for T = 7, 21 ms at 90 tokens), so a file timed after a short context
over-predicts the speed of long texts. With ``long_context``, :meth:`Costs.at_context` prices every call at another
context length, linearly between (and beyond) the two timings per T (a slope per T, never negative): the seconds of
texts decoded at mean context n are then those of calls at n (the mean over the emitted tokens of the tokens before
each; exact for costs linear in the context when calls spread evenly over the text). Without it the figures are
used as timed, whatever the context; ``batch_forward_s`` (concurrency) is always used as timed.

``python benchmark.py perf --write-costs`` measures one on this machine; one can also be written by
hand for hardware one does not have (a GPU whose verification is nearly flat in T). A forward
over more tokens than the list holds extrapolates linearly from its last two entries (flat for a
one-entry list, and never downwards: a noisy curve that dips at its end is extended flat).

What a cost file must mean (:func:`costs_from_dict`; each violation is an InputError naming the file, the key,
the item and the value):

* every time is a finite number of seconds within [:data:`MIN_SECONDS`, :data:`MAX_SECONDS`] (1 ns to
  1e6 s; ``draft_token_s`` may also be 0), so that no derived speedup or tokens per second overflows;
* ``target_forward_s`` does not fall with T beyond measurement noise: no entry is more than
  :data:`FORWARD_DIP_TOLERANCE` (15%) below the largest entry at a smaller T (a verification of more
  tokens cannot be much cheaper than one of fewer; the measured GPU files of ``docs/costs/`` dip by at
  most 9%); the ``batch_forward_s`` seconds likewise within :data:`BATCH_DIP_TOLERANCE` (25%: a batch
  step is timed once per point, with more noise);
* lists that describe the same points have one length: ``batch_forward_s``'s ``tokens``, ``seconds``
  and any other list in it (``requests``, ``tokens_per_request``), and ``target_forward_relative``
  (when present) with ``target_forward_s``.

A draft/target cost ratio c (``--cost-ratio``) is the cost file built in memory by :func:`ratio_costs`:
a verification as cheap as one plain step whatever T, and a drafted token at c of it, in units of one
plain step, so that :meth:`Costs.speedup` = tokens_per_call / (gamma c + 1) (Leviathan et al. 2023, arXiv
2211.17192, section 3.4). The default (:data:`DEFAULT_COSTS`) is that of :data:`DEFAULT_COST_RATIO` = 0.05
(``tokens_per_second`` is then the speedup). Every cost the code passes on is a :class:`Costs`.
"""
from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evolve.errors import InputError, InputWarning, os_error_text
from evolve.files.pins import read_bytes
from evolve.traces.io import json_bytes, read_json

#: Default draft/target cost ratio c of the speedup (a draft model at about 5% of the target's cost).
DEFAULT_COST_RATIO = 0.05

#: Largest cost file read, in bytes.
MAX_FILE_BYTES = 1_000_000

#: Smallest time a cost file may give, in seconds (1 ns: a denormal such as 1e-320 would make speedups inf).
MIN_SECONDS = 1e-9
#: Largest time a cost file may give, in seconds.
MAX_SECONDS = 1e6
#: How far (a fraction) an entry of ``target_forward_s`` may fall below the largest entry at a smaller T.
FORWARD_DIP_TOLERANCE = 0.15
#: How far (a fraction) a ``batch_forward_s`` time may fall below the largest time at fewer tokens.
BATCH_DIP_TOLERANCE = 0.25


@dataclass(frozen=True)
class Costs:
    """A cost model (see the module doc).

    Attributes:
        target_forward_s: seconds of one target forward over T = 1, 2, ... new tokens (non-empty,
            positive, finite).
        draft_token_s: seconds per drafted token (>= 0).
        plain_token_s: seconds per token of plain decoding (> 0).
        source: the file it came from, or a description.
        extra: the file's other keys (machine, engine, ...), kept as read.
        measured: whether the times are seconds measured on a machine (a cost file), so that tokens per second
            mean something; False for a draft/target cost ratio's model (:func:`ratio_costs`), whose unit is one
            target step.
    """

    target_forward_s: tuple[float, ...]
    draft_token_s: float
    plain_token_s: float
    source: str = "default"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    measured: bool = False

    def forward_seconds(self, tokens: int) -> float:
        """Seconds of one target forward over ``tokens`` (>= 1) new tokens (linear beyond the list)."""
        t = self.target_forward_s
        if tokens <= len(t):
            return t[tokens - 1]
        slope = max(0.0, t[-1] - t[-2]) if len(t) >= 2 else 0.0
        return t[-1] + slope * (tokens - len(t))

    def verify_seconds(self, verified: int) -> float:
        """Seconds of the target's call that verifies ``verified`` drafted tokens: a forward over ``verified +
        1`` new tokens; with none it is a step of plain decoding, ``plain_token_s`` (so that a policy that
        never drafts is plain decoding to the cost model too, speedup 1)."""
        return self.plain_token_s if verified == 0 else self.forward_seconds(verified + 1)

    def step_seconds(self, verified: int, drafted: int) -> float:
        """Seconds of one speculative step that drafts ``drafted`` tokens and verifies ``verified`` of them
        (:meth:`verify_seconds` plus the drafting)."""
        return self.verify_seconds(verified) + drafted * self.draft_token_s

    def batch_seconds(self, tokens: float) -> float:
        """Seconds of one target step over ``tokens`` new tokens in total across a batch of requests: the
        cost file's ``batch_forward_s`` curve ({"tokens": [...], "seconds": [...]}, linear between its points
        and beyond them), else :meth:`forward_seconds` of that many tokens (a batch as one long forward)."""
        curve = self.extra.get("batch_forward_s")
        if not curve:
            n = max(1.0, float(tokens))
            lo = int(n)
            return self.forward_seconds(lo) + (n - lo) * (self.forward_seconds(lo + 1) - self.forward_seconds(lo))
        xs, ys = curve["tokens"], curve["seconds"]
        if len(xs) == 1:
            return ys[0] * max(1.0, tokens / xs[0])
        if tokens <= xs[0]:
            return ys[0]
        i = 1
        while i < len(xs) - 1 and xs[i] < tokens:
            i += 1
        slope = max(0.0, (ys[i] - ys[i - 1]) / (xs[i] - xs[i - 1]))
        return ys[i - 1] + slope * (tokens - xs[i - 1])

    def fixed_gamma_seconds(self, gamma: int) -> float:
        """Seconds per call of fixed draft length ``gamma`` (every step drafts and verifies gamma tokens)."""
        return self.step_seconds(gamma, gamma)

    def speedup(self, tokens_per_call: float, gamma: int) -> float:
        """The speedup over plain decoding of ``tokens_per_call`` at fixed draft length ``gamma`` (>= 1):
        tokens_per_call / :meth:`fixed_gamma_seconds` * ``plain_token_s``. For :func:`ratio_costs` (c) it is
        tokens_per_call / (gamma c + 1) (Leviathan et al. 2023, arXiv 2211.17192, section 3.4), the same float:
        the forward is 1.0 + 0.0 exactly and the product by 1.0 is exact."""
        return tokens_per_call / self.fixed_gamma_seconds(gamma) * self.plain_token_s

    @property
    def cost_ratio(self) -> float:
        """The draft/target cost ratio c: seconds per drafted token over seconds per plain token (the ratio a
        table reports; the ``c`` of :func:`ratio_costs`)."""
        return self.draft_token_s if self.plain_token_s == 1.0 else self.draft_token_s / self.plain_token_s

    @property
    def priced_context(self) -> float | None:
        """Tokens of context :meth:`at_context` priced these costs at; None for costs used as timed."""
        n = self.extra.get("priced_at_context_tokens")
        return float(n) if finite_number(n) else None

    @property
    def context_tokens(self) -> float | None:
        """Tokens of context the figures are priced at (the file's ``context_tokens``, or the context given to
        :meth:`at_context`); None when the file does not say."""
        if self.priced_context is not None:
            return self.priced_context
        n = self.extra.get("context_tokens")
        return float(n) if finite_number(n) else None

    def at_context(self, tokens: float | None) -> "Costs":
        """These costs priced at ``tokens`` tokens of context (module doc): each forward time and the plain step
        moved along the line through the file's two timings (``context_tokens`` and ``long_context``), a slope
        below zero (timing noise) taken as flat, no time below :data:`MIN_SECONDS`; ``extra`` gains
        ``priced_at_context_tokens`` and loses ``long_context`` (so a priced model is priced once: pricing it again
        returns it unchanged). Returns ``self`` when the file has no ``long_context`` or ``tokens`` is None or not
        finite. The drafter's time and ``batch_forward_s`` are kept as timed."""
        long = self.extra.get("long_context")
        if not long or tokens is None or not finite_number(tokens):
            return self
        n0, n1 = float(self.extra["context_tokens"]), float(long["context_tokens"])
        f = (float(tokens) - n0) / (n1 - n0)

        def moved(short: float, far: float) -> float:
            return max(MIN_SECONDS, short + max(0.0, far - short) * f)

        curve = tuple(moved(a, b) for a, b in zip(self.target_forward_s, long["target_forward_s"]))
        extra = {k: v for k, v in self.extra.items() if k not in ("long_context", "context_tokens")}
        extra.update(priced_at_context_tokens=float(tokens), timed_at_context_tokens=[int(n0), int(n1)])
        return Costs(curve, self.draft_token_s, moved(self.plain_token_s, long["plain_token_s"]), self.source, extra,
                     self.measured)

    def to_dict(self) -> dict[str, Any]:
        """The cost file's JSON object (the extra keys first, then the three defined ones)."""
        return {**self.extra, "target_forward_s": list(self.target_forward_s), "draft_token_s": self.draft_token_s,
                "plain_token_s": self.plain_token_s}


#: The default cost model: flat verification, drafts at 0.05 of a plain step (the evaluator's ``speedup``).
DEFAULT_COSTS = Costs((1.0,), DEFAULT_COST_RATIO, 1.0,
                      source=f"default (flat verification, draft/target cost ratio {DEFAULT_COST_RATIO:g})")


def finite_number(v: Any) -> bool:
    """Whether ``v`` is a real number (an int or float, numpy's included; not a bool) that is finite as a float:
    NaN, infinities and integers beyond float range are not."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:  # an integer beyond float range
        return False


def ratio_costs(cost_ratio: float, param: str = "cost_ratio") -> Costs:
    """The cost file of a draft/target cost ratio c (``--cost-ratio``), built in memory: a target forward of 1
    (one plain step) whatever T, a drafted token of c, a plain token of 1.

    Raises: InputError naming ``param`` for a c that is not a finite number >= 0.
    """
    c = cost_ratio
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not finite_number(c) or c < 0:
        raise InputError(f"must be a finite number >= 0 (value {c!r})", param=param)
    return Costs((1.0,), float(c), 1.0, source=f"flat verification, draft/target cost ratio {c:g}")


#: Free drafts (cost ratio 0): the speedup is the tokens per call.
FREE_DRAFTS = ratio_costs(0.0)


def costs_from_dict(doc: Any, source: str) -> Costs:
    """Validate a cost object (``doc``, the decoded JSON of the file ``source``) and return its :class:`Costs`.

    Checks what the module doc lists: the keys and their types, times within [:data:`MIN_SECONDS`,
    :data:`MAX_SECONDS`], curves that do not fall with T beyond :data:`FORWARD_DIP_TOLERANCE` and
    :data:`BATCH_DIP_TOLERANCE`, lists of one length.

    Raises: InputError naming ``source``, the key, the item and the value of the first violation.
    """
    if not isinstance(doc, dict):
        raise InputError(f"{source}: a cost file is a JSON object, found {type(doc).__name__}")
    for key in ("target_forward_s", "draft_token_s"):
        if key not in doc:
            raise InputError(f"{source}: missing key '{key}'")
    curve = doc["target_forward_s"]
    if not isinstance(curve, list) or not curve:
        raise InputError(f"{source}: key 'target_forward_s' must be a non-empty list of seconds (T = 1, 2, ...)")
    for i, v in enumerate(curve):
        if not _seconds(v):
            raise InputError(f"{source}: key 'target_forward_s', item {i} (T = {i + 1}): expected seconds in "
                             f"[{MIN_SECONDS:g}, {MAX_SECONDS:g}] (value {v!r})")
    _check_not_falling(curve, FORWARD_DIP_TOLERANCE, source, "target_forward_s", "T = {}", [i + 1 for i in range(len(curve))])
    draft = doc["draft_token_s"]
    if not (_seconds(draft) or (finite_number(draft) and draft == 0)):
        raise InputError(f"{source}: key 'draft_token_s': expected 0 or seconds in [{MIN_SECONDS:g}, {MAX_SECONDS:g}] "
                         f"(value {draft!r})")
    plain = doc.get("plain_token_s", curve[0])
    if not _seconds(plain):
        raise InputError(f"{source}: key 'plain_token_s': expected seconds in [{MIN_SECONDS:g}, {MAX_SECONDS:g}] "
                         f"(value {plain!r})")
    relative = doc.get("target_forward_relative")
    if isinstance(relative, list) and len(relative) != len(curve):
        raise InputError(f"{source}: key 'target_forward_relative' has {len(relative)} items, 'target_forward_s' "
                         f"{len(curve)}; they describe the same T")
    batch = doc.get("batch_forward_s")
    if batch is not None:
        ok = isinstance(batch, dict) and isinstance(batch.get("tokens"), list) and isinstance(batch.get("seconds"), list) \
            and batch["tokens"] and len(batch["tokens"]) == len(batch["seconds"])
        if not ok:
            raise InputError(f"{source}: key 'batch_forward_s' must be an object with lists 'tokens' and 'seconds' of "
                             f"one length")
        for i, (n, s) in enumerate(zip(batch["tokens"], batch["seconds"])):
            if not (finite_number(n) and 1 <= n <= 1e9 and _seconds(s)) or (i and n <= batch["tokens"][i - 1]):
                raise InputError(f"{source}: key 'batch_forward_s', item {i}: expected increasing token counts in "
                                 f"[1, 1e9] and seconds in [{MIN_SECONDS:g}, {MAX_SECONDS:g}] (value {n!r}, {s!r})")
        for key, value in batch.items():
            if isinstance(value, list) and len(value) != len(batch["tokens"]):
                raise InputError(f"{source}: key 'batch_forward_s.{key}' has {len(value)} items, "
                                 f"'batch_forward_s.tokens' {len(batch['tokens'])}; they describe the same points")
        _check_not_falling(batch["seconds"], BATCH_DIP_TOLERANCE, source, "batch_forward_s.seconds", "tokens = {}",
                           batch["tokens"])
    if doc.get("long_context") is not None:
        _check_long_context(doc, source, len(curve))
    extra = {k: v for k, v in doc.items() if k not in ("target_forward_s", "draft_token_s", "plain_token_s")}
    return Costs(tuple(float(v) for v in curve), float(draft), float(plain), source, extra, measured=True)


def _check_long_context(doc: dict, source: str, points: int) -> None:
    """Raise InputError (one line naming ``source`` and the key) unless ``doc['long_context']`` is an object of a
    whole ``context_tokens`` above the file's own, a ``target_forward_s`` of ``points`` seconds and a
    ``plain_token_s`` in seconds (module doc)."""
    long, n0 = doc["long_context"], doc.get("context_tokens")
    if not isinstance(long, dict):
        raise InputError(f"{source}: key 'long_context' must be an object with 'context_tokens', 'target_forward_s' "
                         f"and 'plain_token_s'")
    if not (finite_number(n0) and n0 >= 0 and float(n0).is_integer()):
        raise InputError(f"{source}: key 'context_tokens': expected the whole number of tokens of context the "
                         f"figures were timed after, which 'long_context' needs (value {n0!r})")
    n1 = long.get("context_tokens")
    if not (finite_number(n1) and float(n1).is_integer() and n0 < n1 <= 1e9):
        raise InputError(f"{source}: key 'long_context.context_tokens': expected a whole number of tokens above "
                         f"'context_tokens' ({n0!r}) (value {n1!r})")
    curve = long.get("target_forward_s")
    if not isinstance(curve, list) or len(curve) != points:
        raise InputError(f"{source}: key 'long_context.target_forward_s' must be a list of {points} seconds, as "
                         f"'target_forward_s' (found {type(curve).__name__}"
                         f"{f' of {len(curve)}' if isinstance(curve, list) else ''})")
    for i, v in enumerate(curve + [long.get("plain_token_s")]):
        if not _seconds(v):
            where = "'plain_token_s'" if i == points else f"'target_forward_s', item {i} (T = {i + 1})"
            raise InputError(f"{source}: key 'long_context', {where}: expected seconds in "
                             f"[{MIN_SECONDS:g}, {MAX_SECONDS:g}] (value {v!r})")
    _check_not_falling(curve, FORWARD_DIP_TOLERANCE, source, "long_context.target_forward_s", "T = {}",
                       [i + 1 for i in range(points)])


def _check_not_falling(times: list, tolerance: float, source: str, key: str, label: str, points: list) -> None:
    """Raise InputError unless no time falls more than ``tolerance`` (a fraction) below the largest earlier one."""
    top, at = times[0], 0
    for i, t in enumerate(times):
        if t < (1.0 - tolerance) * top:
            raise InputError(f"{source}: key '{key}', item {i} ({label.format(points[i])}): {t!r} s is more than "
                             f"{tolerance:.0%} below item {at} ({label.format(points[at])}: {top!r} s); a call over "
                             f"more tokens cannot be that much cheaper")
        if t > top:
            top, at = t, i


def load_costs(path: str | os.PathLike | None) -> Costs:
    """The cost model of the JSON file ``path`` (None: :data:`DEFAULT_COSTS`).

    Raises: InputError naming the file for a missing, unreadable, oversized or invalid file (and
    the key and item of a bad value).
    """
    if path is None:
        return DEFAULT_COSTS
    source = _checked_source(path)
    return costs_from_dict(read_json(source, strict=True), source)


def _checked_source(path: str | os.PathLike) -> str:
    source = os.fspath(path)
    if os.path.isdir(source):
        raise InputError(f"{source}: is a directory, expected a cost file (JSON)")
    if not os.path.exists(source):
        raise InputError(f"{source}: no such cost file")
    if os.path.getsize(source) > MAX_FILE_BYTES:
        raise InputError(f"{source}: cost file is larger than {MAX_FILE_BYTES} bytes")
    return source


def load_pinned_costs(path: str | os.PathLike) -> Costs:
    """:func:`load_costs` of a file a run pinned: the bytes parsed are read once, and when ``path`` is pinned
    (:func:`evolve.files.pins.pin`) they must have the pinned SHA-256.

    Raises: InputError as :func:`load_costs`, and one line naming the file when its content is not the pinned
    one (the file changed while the run went)."""
    source = _checked_source(path)
    try:
        raw, _ = read_bytes(source, "cost file")
    except OSError as exc:
        raise InputError(f"{source}: cannot read the cost file ({os_error_text(exc)})") from None
    return costs_from_dict(json_bytes(raw, source, strict=True), source)


def _seconds(v: Any) -> bool:
    """Whether ``v`` is a JSON number of seconds within [MIN_SECONDS, MAX_SECONDS]."""
    return finite_number(v) and MIN_SECONDS <= v <= MAX_SECONDS


def concurrent_tokens_per_second(tokens_per_call: float, verified: float, drafted: float, requests: int,
                                 costs: Costs) -> float:
    """Tokens per second of ``requests`` requests decoded together: each step verifies every request's drafts in
    one target call over requests * (verified + 1) new tokens (:meth:`Costs.batch_seconds`) after ``drafted``
    batched draft steps; expectations per call stand for the per-request distributions (a batch sums many
    requests), and drafting is assumed batched at the cost of one request's drafting."""
    step = costs.batch_seconds(requests * (verified + 1.0)) + drafted * costs.draft_token_s
    return requests * tokens_per_call / step


_LOADED: dict[tuple, Costs] = {}


def cached_costs(path: str | os.PathLike | None) -> Costs:
    """:func:`load_pinned_costs`, read once per file state (path, size, modification time) in this process: a file
    changed after a run pinned it is read again and refused (one line naming it), never scored with."""
    if path is None:
        return DEFAULT_COSTS
    st = os.stat(path) if os.path.isfile(path) else None
    key = (os.path.abspath(path), None if st is None else (st.st_size, st.st_mtime_ns))
    if key not in _LOADED:
        _LOADED[key] = load_pinned_costs(path)
    return _LOADED[key]


#: What a cost file timed inside an engine's own decoding loop says in ``measured_in`` (``benchmark.py perf --write-costs
#: FILE --engine NAME``, :mod:`evolve.perf.engine_loop`); its ``engine`` key names the engine.
ENGINE_LOOP = "engine loop"


def loop_engine(costs: Costs) -> str | None:
    """The engine whose own loop timed ``costs``: its ``engine`` key when its ``measured_in`` is :data:`ENGINE_LOOP`,
    else None (a file of the project's backends, or one written by hand)."""
    name = costs.extra.get("engine")
    return name if costs.extra.get("measured_in") == ENGINE_LOOP and isinstance(name, str) else None


#: A cost file's plain decoding further than this (relative) from a live run's own is reported.
PLAIN_TOLERANCE = 0.10


def check_plain_rate(path, costs: Costs, measured: float | None, where: str) -> str | None:
    """Warn (InputWarning, one line naming the cost file ``path``) when the cost file's plain decoding, 1 /
    ``plain_token_s`` tokens per second, is more than :data:`PLAIN_TOLERANCE` away from the plain decoding a live run
    measured (``measured``, tokens per second; ``where``: its backend and threads, in words): its predictions are
    then off by as much. Returns the message (None when within the tolerance or nothing was measured)."""
    if not measured or not costs.plain_token_s:
        return None
    listed = 1.0 / costs.plain_token_s
    ratio = measured / listed
    if abs(ratio - 1.0) <= PLAIN_TOLERANCE:
        return None
    at = costs.priced_context
    message = (f"{path}: plain decoding at {listed:.2f} tokens/s"
               + (f" (priced at this run's {at:.0f} tokens of context)" if at is not None else "")
               + f", but this run decoded plain text at {measured:.2f} "
               f"({ratio:.2f}x; {where}): the file was measured on another machine, backend, thread count or load, "
               f"and its predictions here are off by as much; measure it here with benchmark.py perf --write-costs"
               + (f" --engine {loop_engine(costs)}" if loop_engine(costs) else ""))
    warnings.warn(InputWarning(message), stacklevel=2)
    return message


__all__ = ["finite_number", "Costs", "DEFAULT_COSTS", "DEFAULT_COST_RATIO", "FREE_DRAFTS", "MAX_FILE_BYTES", "MIN_SECONDS", "MAX_SECONDS",
           "PLAIN_TOLERANCE", "ENGINE_LOOP", "check_plain_rate", "loop_engine", "FORWARD_DIP_TOLERANCE", "BATCH_DIP_TOLERANCE", "costs_from_dict", "load_costs", "load_pinned_costs",
           "cached_costs", "concurrent_tokens_per_second", "ratio_costs"]
