"""Every file the engine exporter can write, for the conformance lane (tests/test_engines_*.py): each engine x every
kind's champions (fixed lengths, block-verified lengths, confidence stops, chains, static and top-k trees, the standard
rule, the shipped families, lossless block verification) x every harvest drafter x per-batch-size schedules, exact
and tuned on a dataset under a cost file, and the refusals; with what each file must mean (the draft length, the
verification method, the drafted tokens per step), read from the setting written, not from the text.

``require(module)`` imports an engine's package, skipping where it is not installed, except in CI (``CI`` set),
where the lane must run: the packages come from the ``engines`` extra and llama-cpp-python's source package, installed
by ``.ci/run``.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from evolve.errors import InputError
from evolve.export.engines.base import Drafter, Engine, Setting
from evolve.export.engines.deploy import PLAIN, engine_config, tuned_schedule
from evolve.export.engines.shapes import constant_value, fixed_length, static_widths, tree_paths
from evolve.export.exporter import layout
from evolve.kinds.relaxation.export_engines import block_rule
from evolve.kinds.tree_shape.export_engines import static_tree_rule, topk_tree_rule
from evolve.kinds.verify_length.export_engines import capped_confidence_rule, fixed_length_rule
from heuristics.contract import STANDARD_RULE, Rule
from heuristics.length_policies import BLOCK_VERIFIER_NAME, confidence_threshold
from heuristics.registry import get_rule


def require(module: str):
    """``module`` imported; skipped where it is not installed, a failure in CI (the lane must run there)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if os.environ.get("CI"):
            raise AssertionError(f"{module} is not installed: .ci/run installs it ({exc})") from exc
        pytest.skip(f"{module} not installed (pip install -e '.[engines]' or '.[llama]', see pyproject.toml)")


#: The harvest drafters a file can be written for.
DRAFTERS = {"unknown": Drafter(), "ngram": Drafter("ngram", (3, 1)), "model": Drafter("model"),
            "eagle": Drafter("eagle")}
#: Per-batch-size schedules: (start, end, length) triples from batch size 1.
SCHEDULES = (((1, 4, 3), (5, 16, 2), (17, 65536, 0)), ((1, 65536, 5),), ((1, 8, 2), (9, 64, 2), (65, 65536, 1)),
             ((1, 65536, 0),))


def champions() -> list[Rule]:
    """A champion of every setting family of every kind, and some no engine writes exactly."""
    lengths = [fixed_length_rule(n, block) for n in (0, 1, 3, 7) for block in (False, True)]
    stops = [capped_confidence_rule(0.4, 5), confidence_threshold(0.3),
             Rule("lookup_policy", expression="sub(lookup_len, draft_index)", kind="verify-length")]
    trees = [static_tree_rule(w) for w in ((), (1,), (1, 1, 1), (2, 1), (3, 2, 1))] + [topk_tree_rule(2, 3)]
    thresholds = [STANDARD_RULE, get_rule("sglang_0.5_0.8"), get_rule("trt_relaxed_10_0.6"), get_rule("mixture_0.9")]
    relaxations = [block_rule(), Rule("w_0.3", expression="0.3", kind="relaxation")]
    return lengths + stops + trees + thresholds + relaxations


@dataclass(frozen=True)
class Case:
    """One export: the ``engine``, the champion ``rule``, the ``drafter``, the ``schedule`` (or None), whether it was
    ``tuned`` on data (``losing``: under a cost file where drafting never pays), and its outcome: the ``text`` and
    ``setting`` written, or the one-line ``refusal``."""

    engine: Engine
    rule: Rule
    drafter: str
    schedule: tuple | None
    tuned: bool
    text: str = ""
    setting: Setting | None = None
    refusal: str = ""
    losing: bool = False

    @property
    def label(self) -> str:
        return (f"{self.engine.name}:{self.rule.name}:{self.drafter}" + (":schedule" if self.schedule else "")
                + (":tuned" if self.tuned else "") + (":losing" if self.losing else ""))


def _case(engine, rule, drafter, schedule=None, data=None, costs=None) -> Case:
    base = dict(engine=engine, rule=rule, drafter=drafter, schedule=schedule, tuned=data is not None,
                losing=costs is not None and Path(costs).name == LOSING)
    try:
        written = engine_config(rule, "test", engine, data, costs, schedule, DRAFTERS[drafter])
    except InputError as exc:
        return Case(**base, refusal=str(exc))
    return Case(**base, text=written.text, setting=written.setting)


def cases(engine: Engine, data=None, costs=None) -> Iterator[Case]:
    """Every file the exporter writes for ``engine`` (exact; with ``data`` and ``costs`` also tuned), and its
    refusals."""
    for rule in champions():
        for drafter in DRAFTERS:
            yield _case(engine, rule, drafter)
    if engine.schedule:
        for schedule in SCHEDULES:
            for drafter in DRAFTERS:
                yield _case(engine, fixed_length_rule(3), drafter, schedule)
    if data is not None:
        for rule in TUNED:
            for drafter in ("unknown", "ngram"):
                yield _case(engine, rule, drafter, None, data, costs)
        yield from losing_cases(engine, data, Path(costs).parent)
        if engine.schedule:
            schedule, _ = tuned_schedule(fixed_length_rule(3), data, costs, (1, 4, 16, 64))
            yield _case(engine, fixed_length_rule(3), "unknown", schedule, data, costs)


#: The champions tuned on a dataset, one of each kind (:func:`cases`).
TUNED = (confidence_threshold(0.3), get_rule("mixture_0.9"), Rule("w_0.3", expression="0.3", kind="relaxation"),
         Rule("entropy_tree", expression="if_gt(0.5, draft_index, add(1.0, mul(2.0, draft_entropy)), "
                                         "if_gt(2.5, draft_index, 1.0, 0.0))", kind="tree-shape"))
#: The name of the cost file under which drafting never pays (:func:`losing_cases`).
LOSING = "losing_costs.json"


def losing_cases(engine: Engine, data, directory) -> Iterator[Case]:
    """The files written for ``engine`` under a cost file (written in ``directory``) where each verified token costs
    a whole plain step more, so drafting never pays: every kind's champion tuned on ``data``, an exact fixed length
    and the standard rule, each written as plain decoding (:data:`evolve.export.engines.deploy.PLAIN`, or a tuned
    setting that drafts nothing)."""
    import json

    path = Path(directory) / LOSING
    path.write_text(json.dumps({"target_forward_s": [0.02 * (1 + t) for t in range(8)], "draft_token_s": 0.004,
                                "plain_token_s": 0.02}))
    for rule in (*TUNED, fixed_length_rule(3), STANDARD_RULE):
        yield _case(engine, rule, "ngram", None, data, str(path))


def drafted(setting: Setting) -> int | None:
    """What the setting drafts per step, as scored: a fixed length's length, a capped confidence stop's cap, a
    tree's node count; None for a setting of acceptance only (a threshold, block verification of any length)."""
    rule = setting.rule
    if setting is PLAIN:
        return 0
    if rule is None or rule.kind in ("threshold", "relaxation"):
        return None
    if rule.kind == "tree-shape":
        widths = static_widths(rule, layout(rule))
        if widths is None:  # a top-k tree: k children of the top k nodes of each level
            top, depth = (int(p) for p in rule.name.split(":")[1].replace("top=", "").replace("depth=", "").split(","))
            return top + (depth - 1) * top * top
        return len(tree_paths(widths))
    length = fixed_length(rule, layout(rule))
    if length is not None:
        return length
    return int(rule.name.rsplit(",n=", 1)[1])  # a capped confidence stop drafts at most its cap


def block(setting: Setting) -> bool:
    """Whether the setting verifies the drafts as a block (as scored)."""
    rule = setting.rule
    if rule is None:
        return False
    if rule.kind == "relaxation":
        return constant_value(rule, layout(rule)) == 0.0
    return rule.setting("verify_with") == BLOCK_VERIFIER_NAME


def length_at(schedule: tuple, batch: int) -> int:
    """The length a schedule gives at ``batch`` (0 past its last range)."""
    return next((length for start, end, length in schedule if start <= batch <= end), 0)


BATCHES = tuple(sorted({1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 64, 65, 100, 1000} | set(np.arange(1, 130, 7).tolist())))
