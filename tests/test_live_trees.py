"""Live decoding with draft trees (``benchmark.py live --tree-nodes N``; :mod:`evolve.live.tree_decoding`) on the tiny random
Llama models of the harvest tests (the ``llama_files`` fixture, tests/harvest_helpers.py); nothing is downloaded.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402

from evolve.cli.benchmark import cli  # noqa: E402
from evolve.engine.runner import BatchKV  # noqa: E402
from evolve.engine.tree_draft import tree_step  # noqa: E402
from evolve.errors import InputError  # noqa: E402
from evolve.eval.costs import Costs  # noqa: E402
from evolve.harvest import loop as hv  # noqa: E402
from evolve.harvest.tree_harvest import generate_tree_text  # noqa: E402
from evolve.eval.tree_competitors import eagle2_topk_expression  # noqa: E402
from evolve.eval.tree_scoring import shape_data, shape_metrics  # noqa: E402
from evolve.live.decoding import LiveCounts, autoregressive_text, tree_call_seconds  # noqa: E402
from evolve.live.tree_decoding import FIXED, TreeDecoder, decision_data, kept_nodes, tree_text  # noqa: E402
from evolve.commands.live import LiveExtras, LiveOptions, live_command, resolve_rules, run_live  # noqa: E402
from evolve.traces.tree_tables import RELAX_COLUMNS, TREE_COLUMNS, trees_from_frame  # noqa: E402
from heuristics.champions import Champion, save_champion  # noqa: E402
from heuristics.contract import Rule  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

NODES, WIDTH, MAX_NEW = 6, 2, 14
PROMPTS = ([7, 12, 3, 9], [5, 9], [4])
#: A hand-written shape: two children at the root, one below.
TWO_THEN_ONE = "if_gt(0.5, draft_index, 2.0, 1.0)"


def _shape(expression: str = TWO_THEN_ONE, name: str = "two_then_one") -> TreeDecoder:
    return TreeDecoder(name, Rule(name, expression=expression, kind="tree-shape").program)


def _config(files, **kw) -> hv.HarvestConfig:
    base = dict(target=files["target"], prompts=files["prompts"], max_new_tokens=MAX_NEW, temperature=0.0, seed=5,
                draft=files["draft"])
    base.update(kw)
    return hv.HarvestConfig(**base)


def _plain(engine, prompt, i, seed=5):
    return autoregressive_text(engine, prompt, MAX_NEW, hv.text_rng(seed, i))[0]


def _tree(engine, shape, prompt, i, seed=5):
    return tree_text(engine, shape, prompt, (NODES, WIDTH), MAX_NEW, hv.text_rng(seed, i))


@pytest.mark.parametrize("drafter", ["draft", "skip_layers", "exit_layer"])
def test_greedy_tree_rows_equal_plain_decoding(llama_files, drafter):
    kw = {"draft": {"draft": llama_files["draft"]}, "skip_layers": {"draft": None, "skip_layers": (1,)},
          "exit_layer": {"draft": None, "exit_layer": 2}}[drafter]
    engine = hv.build(_config(llama_files, **kw)).engine
    level = _shape(eagle2_topk_expression(1, 3, WIDTH), "eagle2_topk")
    for i, prompt in enumerate(PROMPTS):
        plain = _plain(engine, prompt, i)
        for shape in (FIXED, _shape(), level):
            ids, counts = _tree(engine, shape, prompt, i)
            assert ids == plain, shape.name
            assert counts.tokens == len(ids) and counts.target_calls >= 1
            assert abs(counts.expected_tokens - counts.tokens) < 1e-9  # greedy: every outcome is certain


def test_the_target_as_its_own_drafter_accepts_whole_paths(llama_files):
    """``idle`` has identity layers 1 and 3: skipping them drafts with the target itself."""
    engine = hv.build(_config(llama_files, target=llama_files["idle"], draft=None, skip_layers=(1, 3))).engine
    for i, prompt in enumerate(PROMPTS):
        plain = _plain(engine, prompt, i)
        for shape in (FIXED, _shape()):
            ids, counts = _tree(engine, shape, prompt, i)
            assert ids == plain
            assert counts.tokens_per_call > 2.0, shape.name


def test_the_eagle_head_drafts_trees_losslessly(llama_files, tmp_path):
    pytest.importorskip("safetensors")
    from evolve.engine.eagle_head import save_head
    from test_eagle_drafter import head_tensors

    config, tensors = head_tensors(7)
    head = str(save_head(tmp_path / "head", config, tensors))
    engine = hv.build(_config(llama_files, draft=None, eagle=head)).engine
    for i, prompt in enumerate(PROMPTS):
        plain = _plain(engine, prompt, i)
        for shape in (FIXED, _shape()):
            ids, counts = _tree(engine, shape, prompt, i)
            assert ids == plain and counts.mean_drafted > 1.0


def test_the_fixed_tree_decodes_the_tree_harvests_text(llama_files):
    engine = hv.build(_config(llama_files, temperature=1.0)).engine
    for i, prompt in enumerate(PROMPTS):
        harvested, _ = generate_tree_text(engine, prompt, hv.text_rng(11, i), NODES, WIDTH, MAX_NEW)
        ids, counts = _tree(engine, FIXED, prompt, i, seed=11)
        assert ids == harvested.tokens and counts.target_calls == harvested.target_calls


def _step(engine, prompt, seed):
    """One harvest tree step at the end of ``prompt``: its :class:`TreeStep` and its tree table."""
    with torch.inference_mode():
        kv, draft_kv = BatchKV(1, engine.device), BatchKV(1, engine.device)
        kv.place(0, engine.run.prefill(prompt[:-1]), len(prompt) - 1)
        draft_kv.place(0, engine.drafter.run.prefill(prompt[:-1]), len(prompt) - 1)
        step = tree_step(engine, kv, draft_kv, prompt, np.random.default_rng(seed), NODES, WIDTH, 5)
    n = step.tree.n
    cols = dict(step.columns, seq_id=np.zeros(n, dtype=np.int64), tree=np.zeros(n, dtype=np.int64),
                position=np.full(n, 3, dtype=np.int64))
    import pandas as pd

    frame = pd.DataFrame({c.name: (list(cols[c.name]) if cols[c.name].ndim == 2 else cols[c.name])
                          for c in TREE_COLUMNS + RELAX_COLUMNS})
    return step, shape_data(trees_from_frame(frame))


def test_decision_rows_and_prices_are_the_tree_scorers(llama_files):
    engine = hv.build(_config(llama_files, temperature=1.0)).engine
    costs = Costs((0.010, 0.012, 0.013, 0.015, 0.016, 0.018, 0.02), 0.003, 0.009)
    for seed in range(4):
        step, offline = _step(engine, [7, 12, 3, 9], seed)
        live = decision_data(step.tree, 3)
        assert live.decisions.available == offline.decisions.available
        np.testing.assert_array_equal(live.decisions.X, offline.decisions.X)
        for name in ("starts", "parent_row", "first_child", "n_children", "priority", "depth"):
            np.testing.assert_array_equal(getattr(live, name), getattr(offline, name))
        # the fixed tree's price is the scorer's price of the whole tree
        counts = LiveCounts()
        keep = kept_nodes(step.tree, FIXED, 3)
        depth = np.asarray(step.tree.depth)
        expanded = [1] + [int(((depth == d) & (np.asarray(step.tree.children) > 0)).sum()) for d in range(1, 6)]
        counts.add_tree_call(2, 2.0, expanded, len(keep))
        whole = shape_metrics(np.full(offline.decisions.n, np.inf), offline, costs)
        assert counts.predicted_seconds(costs) == pytest.approx(whole.seconds_per_call, rel=1e-12)
        # a shape's kept nodes: the scorer's, on the same rows
        shape = _shape()
        kept = kept_nodes(step.tree, shape, 3)
        assert all(step.tree.sibling[i] < (2 if step.tree.depth[i] == 1 else 1) for i in kept)
        assert shape_metrics(np.where(offline.depth == 0, 2.0, 1.0), offline, costs).mean_nodes == len(kept)


def test_predicted_seconds_by_hand():
    costs = Costs((0.010, 0.012, 0.013, 0.015), 0.003, 0.009)
    counts = LiveCounts()
    counts.add_tree_call(3, 2.5, [1, 2, 1], 4)  # 4 nodes: expanded 1 at the root, 2 at depth 1, 1 at depth 2
    counts.add_call(1)  # one plain step
    counts.add_call(3, 3.0, 2)  # a chain of 2 drafts
    # forward(5) extrapolates the last step: 0.015 + 0.002; passes over 1, 2, 1 nodes: 0.003 * forward(m) / forward(1)
    tree = 0.017 + 0.003 + 0.003 * 0.012 / 0.010 + 0.003
    assert tree_call_seconds(costs, 4, [1, 2, 1]) == pytest.approx(tree, rel=1e-12)
    assert counts.predicted_seconds(costs) == pytest.approx(tree + 0.009 + 0.013 + 2 * 0.003, rel=1e-12)
    assert counts.mean_drafted == pytest.approx(2.0)


def test_sampled_tree_rows_are_reproducible(llama_files):
    engine = hv.build(_config(llama_files, temperature=1.0)).engine
    for shape in (FIXED, _shape()):
        first = [_tree(engine, shape, p, i)[0] for i, p in enumerate(PROMPTS)]
        again = [_tree(engine, shape, p, i)[0] for i, p in enumerate(PROMPTS)]
        other = [_tree(engine, shape, p, i, seed=6)[0] for i, p in enumerate(PROMPTS)]
        assert first == again and first != other


def test_run_live_rows_and_refusals(llama_files, tmp_path):
    rules = resolve_rules(["standard_rejection"], trees=True)
    assert [r.name for r in rules] == ["standard_rejection", "eagle2_full"]
    report = run_live(_config(llama_files, max_new_tokens=8), rules, extras=LiveExtras(tree=(4, 2)))
    rows = {r["rule"]: r for r in report.rows}
    assert rows["eagle2_full"]["same_text"] == 1.0 and rows["eagle2_full"]["tokens_per_call"] >= 1.0
    assert "draft trees of 4 nodes, width 2" in report.caption
    with pytest.raises(InputError, match="is a tree shape") as err:
        run_live(_config(llama_files), [_shape()])
    assert err.value.param == "tree_nodes"
    with pytest.raises(InputError, match="cannot grow a draft tree") as err:
        live_command(LiveOptions(_config(llama_files, draft=None, window=(1, 3)), rules=("standard_rejection",),
                                 tree_nodes=4))
    assert err.value.param == "window"
    with pytest.raises(InputError, match="cannot grow a draft tree") as err:  # run_live alone: refused on decoding
        run_live(_config(llama_files, draft=None, window=(1, 3)), resolve_rules(trees=True),
                 extras=LiveExtras(tree=(4, 2)))
    assert err.value.param == "window"


def test_command_with_a_tree_shape_champion(llama_files, tmp_path):
    champ = Champion(name="two_then_one", expression=TWO_THEN_ONE, description="test shape",
                     features=("draft_index",), kind="tree-shape",
                     metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}})
    path = save_champion(champ, tmp_path)[0]
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"target_forward_s": [0.01, 0.012, 0.013, 0.015, 0.016], "draft_token_s": 0.002}))
    out = tmp_path / "live.json"
    base = ["live", "--target", llama_files["target"], "--draft", llama_files["draft"], "--prompts",
            llama_files["prompts"], "--max-new-tokens", "6", "--temperature", "0", "--no-progress"]
    result = CliRunner().invoke(cli, base + ["--tree-nodes", "4", "--champion", str(path), "--costs", str(costs),
                                             "--output", str(out)])
    assert result.exit_code == 0, result.output
    rows = {r["rule"]: r for r in json.loads(out.read_text()) if r["engine"] == "evolve"}
    assert list(rows) == ["eagle2_full", "two_then_one"]
    for r in rows.values():
        assert r["same_text"] == 1.0 and r["predicted_tokens_per_s"] > 0 and r["tv_per_token"] == 0.0
    refused = CliRunner().invoke(cli, base + ["--champion", str(path)])
    assert refused.exit_code == 2 and "option '--tree-nodes'" in refused.stderr and "tree shape" in refused.stderr
    refused = CliRunner().invoke(cli, base + ["--rule", "standard_rejection", "--tree-width", "3"])
    assert refused.exit_code == 2 and "only with --tree-nodes" in refused.stderr
    window = ["live", "--target", llama_files["target"], "--draft-window", "1,3", "--prompts", llama_files["prompts"],
              "--tree-nodes", "4", "--rule", "standard_rejection", "--no-progress"]
    refused = CliRunner().invoke(cli, window)
    assert refused.exit_code == 2 and "--draft-window" in refused.stderr and "cannot grow" in refused.stderr
