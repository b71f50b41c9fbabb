"""Files written by an earlier version still load and score to the same bits.

``tests/fixtures/format_v2/`` was written by commit 3c68ffc, and every value below was also checked to be
what commit 6ac15f0 (before the kinds became folders) prints for the same files:
the test split of a vocab-model dataset (``generate_data.py --sequences 8 --seed 11``, 55 records), three
champion files of format version 2 (a threshold program and a relaxation weight from ``--objective pareto``
runs, a verification-length policy from a ``tokens_per_second`` run) and ``expected.json``, every numeric
field that version's ``benchmark.py --format json --costs docs/costs/gpu_like.json`` printed for the baselines,
the published rules and each champion. The comparison must reproduce each of them exactly (``==`` on
floats): a refactor that reorders floating-point operations fails here.

One field changed its meaning on purpose: ``cost_ratio`` is the draft/target cost ratio of the one cost model that
prices every figure (the cost file's, 0.004 / 0.020 = 0.2), where that version printed the ``--cost-ratio`` default
(0.05), which priced nothing under ``--costs`` (its speedups were already the cost file's: they are unchanged).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import benchmark

FIXTURE = Path(__file__).parent / "fixtures" / "format_v2"
ROOT = Path(__file__).parent.parent
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())
CHAMPIONS = sorted(name for name in EXPECTED if name.startswith("champion_"))


def _rows(champion: str) -> dict[str, dict]:
    result = CliRunner().invoke(benchmark.cli, ["--data", str(FIXTURE / "data"), "--champion", str(FIXTURE / champion),
                                                "--format", "json", "--costs", str(ROOT / "docs/costs/gpu_like.json")])
    assert result.exit_code == 0, result.output
    text = result.output[result.output.index("{"):]
    return {row["heuristic"]: row for row in json.loads(text)["rows"]}


#: The cost ratio of docs/costs/gpu_like.json (draft_token_s / plain_token_s), what ``cost_ratio`` reports now.
COST_FILE_RATIO = 0.004 / 0.020


def _same(expected: dict, row: dict) -> list[str]:
    expected = {**expected, "cost_ratio": COST_FILE_RATIO} if "cost_ratio" in expected else expected
    return [f"{key}: {row.get(key)!r} != {value!r}" for key, value in expected.items()
            if key != "heuristic" and row.get(key) != value]


@pytest.mark.parametrize("champion", CHAMPIONS)
def test_an_earlier_champion_scores_to_the_same_bits(champion):
    rows = _rows(champion)
    assert not _same(EXPECTED[champion], rows["champion"])
    assert rows["champion"]["program_kind"] == json.loads((FIXTURE / champion).read_text())["kind"]


def test_every_baseline_and_published_rule_scores_to_the_same_bits():
    rows = _rows(CHAMPIONS[0])
    assert {e["heuristic"] for e in EXPECTED["baselines"]} <= set(rows)
    wrong = {e["heuristic"]: _same(e, rows[e["heuristic"]]) for e in EXPECTED["baselines"]}
    assert not {name: diffs for name, diffs in wrong.items() if diffs}
