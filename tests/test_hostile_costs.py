"""Hostile cost files (``--costs``): values that mean nothing are refused in one line naming the file, the
key, the item and the value (``evolve/eval/costs.py``'s module doc lists the checks); every measured
cost file of ``docs/costs/`` still loads (its noise is within the stated tolerance).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from evolve.eval.costs import FORWARD_DIP_TOLERANCE, costs_from_dict, load_costs
from evolve.errors import InputError
from evolve.files.guard import ROOT
from hostile_helpers import check

GOOD = {"target_forward_s": [0.020, 0.021, 0.022, 0.023], "draft_token_s": 0.004, "plain_token_s": 0.020}
BATCH = {"tokens": [1, 64, 128], "seconds": [0.02, 0.024, 0.034]}

# (case, changes to GOOD, text the one-line message holds besides the file name)
CASES = [
    ("denormal-forward", {"target_forward_s": [1e-320, 1e-320]}, ("target_forward_s", "item 0", "1e-320")),
    ("denormal-later-forward", {"target_forward_s": [0.02, 1e-320]}, ("target_forward_s", "item 1", "1e-320")),
    ("tiny-forward", {"target_forward_s": [1e-12]}, ("target_forward_s", "1e-12")),
    ("huge-forward", {"target_forward_s": [1e300]}, ("target_forward_s", "1e+300")),
    ("huge-int-forward", {"target_forward_s": [10 ** 400]}, ("target_forward_s", "item 0")),
    ("denormal-plain", {"plain_token_s": 5e-324}, ("plain_token_s", "5e-324")),
    ("huge-plain", {"plain_token_s": 1e200}, ("plain_token_s", "1e+200")),
    ("denormal-draft", {"draft_token_s": 1e-310}, ("draft_token_s", "1e-310")),
    ("huge-draft", {"draft_token_s": 1e12}, ("draft_token_s", "1000000000000")),
    ("negative-draft", {"draft_token_s": -0.1}, ("draft_token_s", "-0.1")),
    ("string-draft", {"draft_token_s": "0.1"}, ("draft_token_s", "'0.1'")),
    ("null-forward", {"target_forward_s": [0.02, None]}, ("target_forward_s", "item 1", "None")),
    ("bool-forward", {"target_forward_s": [True]}, ("target_forward_s", "True")),
    ("six-cheaper-than-one", {"target_forward_s": [0.02, 0.021, 0.022, 0.023, 0.024, 0.010]},
     ("target_forward_s", "item 5", "T = 6", "T = 5")),
    ("falling-curve", {"target_forward_s": [0.05, 0.04, 0.03, 0.02]}, ("target_forward_s", "item 1", "T = 2")),
    ("dip-below-an-earlier-peak", {"target_forward_s": [0.02, 0.03, 0.031, 0.024]}, ("item 3", "T = 4", "T = 3")),
    ("relative-length", {"target_forward_relative": [1.0, 1.1]}, ("target_forward_relative", "2 items")),
    ("batch-falling", {"batch_forward_s": {"tokens": [1, 64, 128], "seconds": [0.02, 0.024, 0.010]}},
     ("batch_forward_s.seconds", "item 2", "tokens = 128")),
    ("batch-denormal", {"batch_forward_s": {"tokens": [1, 64], "seconds": [0.02, 1e-320]}},
     ("batch_forward_s", "item 1", "1e-320")),
    ("batch-lengths", {"batch_forward_s": {"tokens": [1, 64], "seconds": [0.02]}}, ("batch_forward_s",)),
    ("batch-requests-length", {"batch_forward_s": {**BATCH, "requests": [1, 64]}},
     ("batch_forward_s.requests", "2 items")),
    ("batch-tokens-not-increasing", {"batch_forward_s": {"tokens": [1, 64, 64], "seconds": [0.02, 0.03, 0.04]}},
     ("batch_forward_s", "item 2")),
    ("batch-zero-tokens", {"batch_forward_s": {"tokens": [0, 64], "seconds": [0.02, 0.03]}},
     ("batch_forward_s", "item 0")),
]


@pytest.mark.parametrize("changes,culprits", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_cost_file_is_refused_in_one_line(tmp_path, changes, culprits):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**GOOD, **changes}))
    with pytest.raises(InputError) as err:
        load_costs(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    for culprit in culprits:
        assert culprit in message, (culprit, message)


@pytest.mark.parametrize("path", sorted((ROOT / "docs" / "costs").glob("*.json")), ids=lambda p: p.name)
def test_every_shipped_cost_file_loads(path):
    costs = load_costs(path)
    assert costs.speedup(2.0, 3) < float("inf")


def test_noise_within_the_tolerance_is_admitted():
    dip = 1.0 - FORWARD_DIP_TOLERANCE / 2
    costs = costs_from_dict({**GOOD, "target_forward_s": [0.02, 0.03, 0.03 * dip, 0.031]}, "noisy.json")
    assert costs.forward_seconds(3) == 0.03 * dip
    costs_from_dict({**GOOD, "batch_forward_s": {**BATCH, "requests": [1, 64, 64]}}, "ok.json")


def test_speedups_of_extreme_admitted_times_are_finite():
    costs = costs_from_dict({"target_forward_s": [1e-9], "draft_token_s": 0, "plain_token_s": 1e6}, "x.json")
    assert costs.speedup(100.0, 1) < float("inf")


@pytest.mark.parametrize("curve", [[1e-320, 1e-320], [0.02, 0.021, 0.022, 0.023, 0.024, 0.010]],
                         ids=["denormal", "six-cheaper-than-one"])
@pytest.mark.parametrize("command", [["--repeats", 1], ["trees", "--bootstrap", 0], ["simulate", "--samples", 200],
                                     ["pareto"]], ids=["benchmark", "trees", "simulate", "pareto"])
def test_commands_refuse_a_bad_cost_file(ws, curve, command):
    path: Path = ws.root / "c.json"
    path.write_text(json.dumps({**GOOD, "target_forward_s": curve}))
    args = [command[0], "--costs", path, *command[1:]] if command[0] in ("trees", "simulate", "pareto") \
        else ["--costs", path, *command]
    if command[0] not in ("simulate",):
        args += ["--data", ws.data]
    check(ws, "benchmark", args, 2, (str(path), "target_forward_s"))


def test_a_noisy_measured_curve_is_written_as_its_running_maximum():
    """``perf --write-costs`` never writes a file its own reader refuses: a T-curve whose medians fall beyond the
    tolerance (timing noise) is written as its running maximum, with a warning, the medians kept."""
    from evolve.errors import InputWarning
    from evolve.perf.costs import _envelope

    with pytest.warns(InputWarning, match="running maximum"):
        curve, measured = _envelope([0.002, 0.006, 0.0016, 0.0061], 2)
    assert curve == [0.002, 0.006, 0.006, 0.0061] and measured == [0.002, 0.006, 0.0016, 0.0061]
    costs_from_dict({"target_forward_s": curve, "draft_token_s": 0.001}, "written.json")
    assert _envelope([0.02, 0.021, 0.0205], 7) == ([0.02, 0.021, 0.0205], [0.02, 0.021, 0.0205])


@pytest.mark.parametrize("curve", [[1e-320], [0.03, 0.02, 0.01]], ids=["denormal", "falling"])
def test_a_verify_length_run_refuses_a_bad_cost_file(vocab_ws, curve):
    path = vocab_ws.root / "c.json"
    path.write_text(json.dumps({**GOOD, "target_forward_s": curve}))
    check(vocab_ws, "evolve", ["run", "--data", vocab_ws.data, "--out", vocab_ws.root / "runs", "--evolve",
                               "verify-length", "--objective", "tokens_per_second", "--costs", path,
                               "--population", 4, "--generations", 1, "--no-progress", "--from-scratch"],
          2, (str(path), "target_forward_s"))
