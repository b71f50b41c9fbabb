"""A cost file whose plain decoding disagrees with the live run's own is reported, naming the file
(evolve.eval.costs.check_plain_rate, called by benchmark.py live)."""
from __future__ import annotations

import json
import warnings

import pytest

from evolve.errors import InputWarning
from evolve.eval.costs import PLAIN_TOLERANCE, check_plain_rate, load_costs


@pytest.fixture
def costs(tmp_path):
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"target_forward_s": [0.02, 0.03, 0.04], "draft_token_s": 0.001,
                                "plain_token_s": 0.02}))  # 50 tokens/s
    return path, load_costs(path)


@pytest.mark.parametrize("measured, reported", [(50.0, False), (50.0 * (1 + PLAIN_TOLERANCE) - 0.01, False),
                                                (56.0, True), (12.5, True), (None, False)])
def test_plain_decoding_far_from_the_cost_file_is_reported(costs, measured, reported):
    path, loaded = costs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        message = check_plain_rate(path, loaded, measured, "backend torch, 1 threads")
    assert (message is not None) == reported
    assert len([w for w in caught if issubclass(w.category, InputWarning)]) == int(reported)
    if reported:
        assert str(path) in message and "50.00 tokens/s" in message and "\n" not in message
