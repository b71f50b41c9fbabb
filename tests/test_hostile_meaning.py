"""Hostile input checked for what it means, not only for its range (the cases of ``test_hostile.py``'s kind).

* ``block_residual_phi``: a record that decreases in a, is concave, rises faster than slope 1, is all
  zero, disagrees with the next record's ``overlap`` at a = 1, is finite on a block's last record, or
  holds 10 values instead of 32; and, as a property (hypothesis), random valid records built from
  random (p, q) with the project's own phi function pass while random violations are refused;
* dtypes: ``target_rank`` as uint64 holding 2**64 - 1, ``draft_prob`` as float32, ``position`` as int32
  and ``block_residual_phi`` as lists of float32 are refused naming the column and both dtypes (the
  datasets our own writers produce, Parquet and JSON, load);
* option values that used to be clamped silently (``simulate --relaxation 2``);
* paths holding control characters in every command that prints the path it writes;
* ``evolve show`` of a missing path and of the checkpoint directory of a run stopped by Ctrl-C;
* Ctrl-C while ``benchmark.py perf --islands --large-only`` generates its dataset (no temporary file left).

Each refusal: exit code 2, one line ``error: ...`` naming the culprit, no traceback, every input
byte-identical and no file created (:func:`hostile_helpers.check`).
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evolve.errors import InputError
from evolve.traces.io import Traces, load_split
from evolve.files.guard import ROOT
from evolve.traces.schema import PHI_TOLERANCE, RESIDUAL_PHI_POINTS
from evolve.verification.block import block_phi

from hostile_helpers import check, invoke

K = RESIDUAL_PHI_POINTS


def _bench(ws, *extra):
    return "benchmark", ["--data", ws.data, "--repeats", 1, *extra]


# ---- block_residual_phi: what the values mean ----------------------------------------------------

def _phi_rows(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(phi float64 (n, K), is a block's last record, 1 - overlap of the next record (NaN at the end))."""
    phi = np.array([np.full(K, np.nan) if v is None else np.asarray(v, dtype=np.float64)
                    for v in df["block_residual_phi"]])
    d = df["draft_index"].to_numpy()
    last = np.append(d[1:] == 0, True)
    gap = np.append(1.0 - df["overlap"].to_numpy()[1:], np.nan)
    return phi, last, gap


def _row_with_gap(df: pd.DataFrame, low: float = 0.2) -> int:
    """A record that is not a block's last and whose next record's 1 - overlap exceeds ``low``."""
    _, last, gap = _phi_rows(df)
    return int(np.flatnonzero(~last & (gap > low))[0])


def _set_phi(ws, change) -> int:
    """Replace one record of the test split's phi by ``change(df) -> (row, new value)``; returns the row."""
    df = ws.frame()
    row, value = change(df)
    values = list(df["block_residual_phi"])
    values[row] = None if value is None else np.asarray(value, dtype=np.float64)
    df["block_residual_phi"] = values
    ws.save(df)
    return row


def _phi_case(change, *fragments):
    def setup(ws):
        row = _set_phi(ws, change)
        return _bench(ws), ("test.parquet", "'block_residual_phi'", f"row {row}", *fragments)
    return setup


def _decreasing(df):
    row = _row_with_gap(df)
    phi, _, _ = _phi_rows(df)
    return row, phi[row][::-1]  # largest value first


def _all_zero(df):
    return _row_with_gap(df), np.zeros(K)


def _concave(df):
    row = _row_with_gap(df)
    _, _, gap = _phi_rows(df)
    a = np.arange(1, K + 1) / K
    return row, np.minimum(a, gap[row])  # slope 1 then 0: ends at 1 - overlap, non-decreasing, but concave


def _steep(df):
    row = _row_with_gap(df, 0.1)
    _, _, gap = _phi_rows(df)
    values = np.zeros(K)
    values[-1] = gap[row]  # one step of gap > 1/32: a slope above 1
    return row, values


def _halved(df):
    row = _row_with_gap(df)
    phi, _, _ = _phi_rows(df)
    return row, phi[row] / 2  # still convex, but phi(1) is no longer 1 - overlap of the next record


def _finite_at_last(df):
    phi, last, _ = _phi_rows(df)
    row = int(np.flatnonzero(last)[0])
    return row, phi[row - 1]


def _null_inside(df):
    return _row_with_gap(df), None


def _ten_values(df):
    return _row_with_gap(df), np.linspace(0.0, 0.1, 10)


def _off_by_round_off(df):
    """A record changed by far less than the round-off allowed: still valid."""
    row = _row_with_gap(df)
    phi, _, _ = _phi_rows(df)
    return row, phi[row] + PHI_TOLERANCE / 10 * np.arange(1, K + 1) / K


PHI_CASES = [
    ("decreasing", _phi_case(_decreasing, "decreases in a")),
    ("all-zero", _phi_case(_all_zero, "phi(1) = 0.0", "1 - overlap of the next record")),
    ("concave", _phi_case(_concave, "not convex")),
    ("slope-above-1", _phi_case(_steep, "slope", "> 1")),
    ("endpoint-off", _phi_case(_halved, "phi(1)", "1 - overlap of the next record")),
    ("finite-at-last-record", _phi_case(_finite_at_last, "last record must be null")),
    ("null-inside-a-block", _phi_case(_null_inside, "only valid at a block's last record")),
    ("ten-values", _phi_case(_ten_values, "expected a list of 32 numbers", "found 10 values")),
]


@pytest.mark.parametrize("setup", [c[1] for c in PHI_CASES], ids=[c[0] for c in PHI_CASES])
def test_phi_that_means_nothing_is_refused(vocab_ws, setup):
    command, culprits = setup(vocab_ws)
    check(vocab_ws, *command, 2, culprits)


def test_phi_within_round_off_passes(vocab_ws):
    _set_phi(vocab_ws, _off_by_round_off)
    res = invoke(*_bench(vocab_ws, "--format", "json"))
    assert res.exit_code == 0, res.output


def test_phi_is_refused_by_pareto_too(vocab_ws):
    _set_phi(vocab_ws, _decreasing)
    check(vocab_ws, "benchmark", ["pareto", "--data", vocab_ws.data, "--no-plot"], 2,
          ("test.parquet", "'block_residual_phi'", "decreases in a"))


# ---- dtypes ----------------------------------------------------------------------------------------

def _dtype(column, make, *fragments):
    def setup(ws):
        df = ws.frame()
        df[column] = make(df[column])
        ws.save(df)
        return _bench(ws), ("test.parquet", f"'{column}'", *fragments)
    return setup


def _uint64_max(series):
    out = series.astype(np.uint64)
    out.iloc[0] = np.uint64(2 ** 64 - 1)
    return out


DTYPE_CASES = [
    ("target-rank-uint64", _dtype("target_rank", _uint64_max, "dtype uint64", "expected int64",
                                  "18446744073709551615")),
    ("draft-prob-float32", _dtype("draft_prob", lambda s: s.astype(np.float32), "dtype float32", "expected float64")),
    ("position-int32", _dtype("position", lambda s: s.astype(np.int32), "dtype int32", "expected int64")),
    ("match-float", _dtype("top_token_match", lambda s: s.astype(np.float64), "dtype float64", "expected bool")),
    ("phi-float32-lists", _dtype("block_residual_phi", lambda s: [None if v is None else np.asarray(v, np.float32)
                                                                  for v in s],
                                 "dtype list<float32>", "expected list<float64>")),
]


@pytest.mark.parametrize("setup", [c[1] for c in DTYPE_CASES], ids=[c[0] for c in DTYPE_CASES])
def test_wrong_dtype_is_named(vocab_ws, setup):
    command, culprits = setup(vocab_ws)
    check(vocab_ws, *command, 2, culprits)


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_datasets_of_our_own_writers_load(vocab_ws, fmt):
    if fmt == "json":
        vocab_ws.as_json()
    for split in ("train", "valid", "test"):
        traces = load_split(vocab_ws.data, split)
        assert {c: v.dtype.name for c, v in traces.columns.items()}["target_rank"] == "int64"
    res = invoke(*_bench(vocab_ws, "--format", "json"))
    assert res.exit_code == 0, res.output


def test_json_integers_are_exact_numbers(ws):
    """JSON has numbers, not dtypes: 1 in a float column, 3.0 in an integer column and 0/1 in a boolean
    one are the same values and load; 2**63 in an integer column does not fit and is refused."""
    ws.as_json()
    records = ws.records()
    records[0]["target_entropy"] = 1
    records[1]["position"] = float(records[1]["position"])
    for rec in records:
        rec["top_token_match"] = int(rec["top_token_match"])
    ws.write_records(records)
    load_split(ws.data, "test")
    for rec in records:
        rec["position"] = int(rec["position"])
    records[3]["position"] = 2 ** 63
    ws.write_records(records)
    check(ws, *_bench(ws), 2, ("test.json", "'position'", "int64"))


# ---- options that were clamped ---------------------------------------------------------------------

@pytest.mark.parametrize("value", ["2", "-0.5", "add(0.7, 0.7)"])
def test_constant_relaxation_outside_0_1_is_refused(ws, value):
    check(ws, "benchmark", ["simulate", "--verify", "block", "--relaxation", value, "--lengths", 5, "--samples", 1,
                            "--no-plot"], 2, ("'--relaxation'", "[0, 1]", value))


# ---- paths with control characters -----------------------------------------------------------------

def _prompts(ws) -> Path:
    path = ws.root / "prompts.txt"
    path.write_text("one\ntwo\nthree\n")
    return path


CONTROL_CASES = [
    ("run-out-newline", lambda ws: ("evolve", ["run", "--data", ws.data, "--out", ws.root / "dir\nline"]),
     ("out", "dir\\nline", "control character")),
    ("generate-out-tab", lambda ws: ("generate", ["--out", ws.root / "a\tb"]), ("'--out'", "a\\tb")),
    ("harvest-out-newline", lambda ws: ("generate", ["harvest", "--target", ws.adir, "--draft-window", "4,8",
                                                     "--prompts", _prompts(ws), "--out", ws.root / "h\nx"]),
     ("'--out'", "control character")),
    ("promote-dir-escape", lambda ws: ("evolve", ["promote", ws.run, "ok", "--champions-dir", ws.root / "c\x1b[2Jd"]),
     ("'--champions-dir'", "\\x1b")),
    ("export-output-newline", lambda ws: ("evolve", ["export", ws.champion, "--to", "numpy", "--output",
                                                     ws.root / "e\nf.py"]), ("'--output'", "control character")),
    ("benchmark-output-cr", lambda ws: _bench(ws, "--output", ws.root / "b\rc.json"), ("'--output'", "\\r")),
    ("simulate-output-newline", lambda ws: ("benchmark", ["simulate", "--output", ws.root / "s\n.json"]),
     ("'--output'", "control character")),
    ("perf-large-dir-newline", lambda ws: ("benchmark", ["perf", "--islands", "--large-only", "--large-dir",
                                                         ws.root / "l\nd"]), ("'--large-dir'", "control character")),
    ("run-out-line-separator", lambda ws: ("evolve", ["run", "--data", ws.data, "--out", ws.root / "u\u2028v"]),
     ("out", "\\u2028")),
]


@pytest.mark.parametrize("setup,culprits", [c[1:] for c in CONTROL_CASES], ids=[c[0] for c in CONTROL_CASES])
def test_path_with_control_characters_is_refused(ws, setup, culprits):
    check(ws, *setup(ws), 2, culprits)


# ---- evolve show ---------------------------------------------------------------------------------------

def test_show_of_a_missing_path_names_both_kinds(ws):
    check(ws, "evolve", ["show", ws.root / "nowhere"], 2, ("nowhere", "no such run directory or champion file"))


def test_show_of_the_checkpoint_of_a_stopped_run_shows_the_champion_written(ws):
    """After a Ctrl-C the run directory is written and the checkpoint directory kept (its ``run.json``
    names it): ``show`` of the checkpoint directory shows that champion, not "no champion yet"."""
    out = ws.root / "out"
    out.mkdir()
    run_dir = out / "run-20260101-120000-seed0"
    shutil.copytree(ws.run, run_dir)
    partial = out / f".{run_dir.name}.partial"
    partial.mkdir()
    summary = json.loads((run_dir / "run.json").read_text())
    summary.update(interrupted=True, checkpoint_dir=str(partial))
    (run_dir / "run.json").write_text(json.dumps(summary))
    res = invoke("evolve", ["show", partial])
    assert res.exit_code == 0, res.output
    expression = json.loads((run_dir / "champion.json").read_text())["expression"]
    assert f"champion:   {expression}" in res.stdout
    assert str(run_dir) in res.stdout and "no champion yet" not in res.output


# ---- Ctrl-C while perf --islands generates its dataset ---------------------------------------------------

@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_while_perf_generates_leaves_no_temporary_file(tmp_path):
    large = tmp_path / "large"
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmark.py"), "perf", "--islands", "--large-only",
                             "--large-dir", str(large), "--large-tokens", "2000000", "--output",
                             str(tmp_path / "perf.json")], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # even if ignored here
    seen = b""
    deadline = time.monotonic() + 240
    while b"generating" not in seen:
        assert time.monotonic() < deadline, seen[-2000:]
        if select.select([proc.stderr], [], [], 1.0)[0]:
            chunk = os.read(proc.stderr.fileno(), 4096)
            assert chunk, (proc.poll(), seen[-2000:])
            seen += chunk
    deadline = time.monotonic() + 60
    while not any(".tmp-" in p.name for p in large.rglob("*")):  # the write has begun
        assert proc.poll() is None and time.monotonic() < deadline, seen[-2000:]
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
    out, err = proc.communicate(timeout=180)
    err = (seen + err).decode(errors="replace")
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    left = [str(p) for p in large.rglob("*") if ".tmp-" in p.name]
    assert not left, left
    assert not (tmp_path / "perf.json").exists()


# ---- property: phi from random distributions passes, any violation is refused ----------------------------

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _distribution(draw, size: int) -> np.ndarray:
    weights = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=size, max_size=size)))
    zeros = np.array(draw(st.lists(st.booleans(), min_size=size, max_size=size)))
    weights[zeros & (np.arange(size) > 0)] = 0.0  # exact zeros, as top-k/top-p truncation gives
    if weights.sum() <= 0:
        weights[0] = 1.0
    return weights / weights.sum()


@st.composite
def blocks(draw):
    """A block of 2..4 records over a vocabulary of 2..8 tokens: (p, q) float64 (k, V) at each depth."""
    k, size = draw(st.integers(2, 4)), draw(st.integers(2, 8))
    p = np.stack([_distribution(draw, size) for _ in range(k)])
    q = np.stack([_distribution(draw, size) for _ in range(k)])
    return p, q


def _frame(p: np.ndarray, q: np.ndarray) -> pd.DataFrame:
    """A schema-valid frame of one block (draft token 0 where q > 0, else the arg max of q) with its phi."""
    k = p.shape[0]
    x = np.array([0 if q[d, 0] > 0 else int(q[d].argmax()) for d in range(k)])
    tp, dp = p[np.arange(k), x], q[np.arange(k), x]
    u = np.full(k, 0.5)
    return pd.DataFrame({
        "seq_id": np.zeros(k, np.int64), "position": np.arange(k, dtype=np.int64), "draft_prob": dp,
        "target_prob": tp, "draft_entropy": np.zeros(k), "target_entropy": np.zeros(k),
        "top_token_match": p.argmax(1) == q.argmax(1), "rand_value": u, "baseline_accepts": u < np.minimum(1, tp / dp),
        "draft_index": np.arange(k, dtype=np.int64), "draft_top_prob": q.max(1), "target_top_prob": p.max(1),
        "overlap": np.clip(np.minimum(p, q).sum(1), 0.0, 1.0), "block_residual_phi": list(block_phi(p, q)),
    })


def _load(frame: pd.DataFrame):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Traces.from_frame(frame, "f")


@SETTINGS
@given(block=blocks())
def test_phi_of_random_distributions_passes(block):
    traces = _load(_frame(*block))
    phi = traces["block_residual_phi"]
    assert np.isnan(phi[-1]).all() and np.isfinite(phi[:-1]).all()


@SETTINGS
@given(block=blocks(), kind=st.sampled_from(["monotone", "convex", "endpoint", "slope"]),
       where=st.integers(0, K - 1), size=st.floats(1e-6, 0.5), depth=st.integers(0, 2))
def test_phi_violations_are_refused(block, kind, where, size, depth):
    p, q = block
    frame = _frame(p, q)
    rows = [None if np.isnan(v).all() else np.array(v) for v in frame["block_residual_phi"]]
    row = min(depth, len(rows) - 2)
    phi = rows[row]
    if kind == "monotone":  # a dip of ``size`` from one grid value to the next
        where = max(where, 1)
        if phi[where - 1] >= size:
            phi[where] = phi[where - 1] - size
        else:
            phi[where - 1] = phi[where] + size
    elif kind == "convex":  # a bump above the chord of the neighbours
        where = min(max(where, 1), K - 2)
        phi[where] = (phi[where - 1] + phi[where + 1]) / 2 + size
    elif kind == "endpoint":  # phi(1) off 1 - overlap of the next record, the rest kept convex
        target = min(1.0, phi[-1] + size) if phi[-1] + size <= 1.0 else phi[-1] - size
        phi[:] = phi * (target / phi[-1]) if phi[-1] > 0 else target * np.arange(1, K + 1) / K
        phi[-1] = target
    else:  # one step steeper than slope 1
        phi[where:] += 1.0 / K + size
    phi = np.clip(phi, 0.0, 1.0)
    frame["block_residual_phi"] = rows[:row] + [phi] + rows[row + 1:]
    truth = np.asarray(block_phi(p, q)[row])
    step = np.diff(phi, prepend=0.0)
    violated = ((step < -PHI_TOLERANCE).any() or (step > 1 / K + PHI_TOLERANCE).any()
                or (np.diff(step) < -PHI_TOLERANCE).any() or abs(phi[-1] - truth[-1]) > PHI_TOLERANCE)
    if not violated:  # the clipping to [0, 1] undid the change (a rare corner): nothing to refuse
        _load(frame)
        return
    with pytest.raises(InputError) as err:
        _load(frame)
    text = str(err.value)
    assert "\n" not in text and f"column 'block_residual_phi', row {row}" in text, text
