"""Suffix decoding's draft trees (evolve/engine/suffix_tree.py): the tree's shape, its exact columns and walk, and the
tree harvest on the tiny offline models with arctic-inference 0.3.0 (CI installs it; elsewhere the harvest tests
skip where it is missing)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from engine_helpers import require
from evolve.cli.benchmark import cli as benchmark_cli
from evolve.engine.suffix_tree import deterministic_node_columns, shape_tree, walk_verify
from evolve.traces.tree_tables import SUFFIX_TREE_COLUMN_NAMES, load_trees, trees_from_frame
from harvest_helpers import harvest_config
from evolve.harvest import loop as hv

pytestmark = pytest.mark.usefixtures("one_thread")


# ----------------------------------------------------------------------------- shape and columns, no library


def test_shape_keeps_the_most_probable_children_parents_first():
    #  library order: 0 (root child, .6), 1 (root child, .3), 2 (child of 0, .5), 3 (child of 1, .2),
    #  4 (child of 0, .55), 5 (child of 2, .4), 6 (root child, .1)
    parents = [-1, -1, 0, 1, 0, 2, -1]
    tokens = [10, 11, 12, 13, 14, 15, 16]
    probs = [.6, .3, .5, .2, .55, .4, .1]
    assert shape_tree(parents, tokens, probs, width=3, max_depth=5, eos=set()) == [0, 1, 6, 4, 2, 3, 5]
    assert shape_tree(parents, tokens, probs, width=1, max_depth=5, eos=set()) == [0, 4]
    assert shape_tree(parents, tokens, probs, width=2, max_depth=1, eos=set()) == [0, 1]
    assert shape_tree(parents, tokens, probs, width=3, max_depth=5, eos={10}) == [0, 1, 6, 3]
    with pytest.raises(ValueError, match="parent"):
        shape_tree([0], [1], [1.0], 1, 1, set())


def _tree_and_p(seed: int, V: int = 6):
    """A tree of distinct siblings (parents first, siblings contiguous) and random target rows."""
    rng = np.random.default_rng(seed)
    parents = [-1, -1, -1, 0, 0, 1, 3, 3, 6]
    tokens = []
    for i, par in enumerate(parents):
        used = {tokens[j] for j in range(i) if parents[j] == par}
        tokens.append(int(rng.choice([v for v in range(V) if v not in used])))
    p = rng.dirichlet(np.full(V, 0.6), size=len(parents) + 1)
    return parents, tokens, p


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_columns_are_exact_and_the_walk_matches_them(seed):
    parents, tokens, p = _tree_and_p(seed)
    cols = deterministic_node_columns(parents, tokens, p, np.zeros(len(parents) + 1))
    n = len(parents)
    # the walk accepts a node with the product of p along its path
    reach = np.zeros(n)
    for i, par in enumerate(parents):
        reach[i] = p[par + 1, tokens[i]] * (reach[par] if par >= 0 else 1.0)
    assert cols["specinfer_tokens"][0] == pytest.approx(1.0 + reach.sum(), abs=1e-12)
    # SpecInfer's sequential tries with one-hot q (a = residual_prob) give the same node probabilities
    seq = np.zeros(n)
    rejected: dict[int, float] = {}
    for i, par in enumerate(parents):
        before = rejected.get(par, 1.0)
        seq[i] = (seq[par] if par >= 0 else 1.0) * before * cols["residual_prob"][i]
        rejected[par] = before * (1.0 - cols["residual_prob"][i])
    np.testing.assert_allclose(seq, reach, atol=1e-12)
    # the walk, sampled: accepted lengths and the first emitted token's distribution
    rng = np.random.default_rng(seed + 10)
    draws, lengths, first = 20_000, [], np.zeros(p.shape[1])
    for _ in range(draws):
        path, nxt = walk_verify(parents, tokens, p, rng)
        lengths.append(len(path))
        first[tokens[path[0]] if path else nxt] += 1
    assert np.mean(lengths) + 1 == pytest.approx(cols["specinfer_tokens"][0], abs=0.03)
    np.testing.assert_allclose(first / draws, p[0], atol=0.015)  # lossless: the target's own token
    table = trees_from_frame(pd.DataFrame({**cols, "seq_id": np.zeros(n, dtype=np.int64),
                                           "tree": np.zeros(n, dtype=np.int64),
                                           "position": np.zeros(n, dtype=np.int64)}))
    assert table.rows == n and not table.relaxable


# ----------------------------------------------------------------------------- the harvest


@pytest.fixture(scope="module")
def repeating(llama_files, tmp_path_factory):
    """Prompts that repeat one another, so that the suffix trees match (as tests/test_suffix.py's)."""
    root = tmp_path_factory.mktemp("suffix-trees")
    base = ["w1 w2 w3 w4 w5 w6 w1 w2 w3", "w7 w8 w9 w1 w2 w3 w7 w8", "w4 w5 w6 w7 w8 w9 w4 w5"]
    path = root / "p.txt"
    path.write_text("\n".join(base[i % 3] + f" w{10 + i}" for i in range(12)) + "\n")
    return path


def _harvest(files, prompts, out, **kw):
    config = harvest_config(files, out, prompts=str(prompts), suffix=(16, 50), gamma=4, max_new_tokens=16,
                            threads=1, **kw)
    return hv.harvest(config, progress=False)


@pytest.fixture(scope="module")
def greedy_trees(llama_files, repeating):
    require("arctic_inference.suffix_decoding")
    out = llama_files["root"] / "suffix-trees-greedy"
    _harvest(llama_files, repeating, out, temperature=0.0, tree_nodes=8, tree_width=3)
    return out


def test_a_greedy_suffix_tree_harvest_is_lossless_and_recorded(greedy_trees, llama_files, repeating):
    from evolve.traces.io import load_metadata

    meta = load_metadata(greedy_trees)
    assert meta["tree"]["deterministic"] and "use_tree_spec" in meta["tree"]["growth"]
    tables = {s: load_trees(greedy_trees, s) for s in ("train", "valid", "test")}
    rows = sum(t.rows for t in tables.values())
    assert rows > 20
    for t in tables.values():
        assert all(c in t.columns for c in SUFFIX_TREE_COLUMN_NAMES) and not t.relaxable
        assert (t.columns["draft_prob"] == 1).all()
        assert set(np.unique(t.columns["target_prob"])) <= {0.0, 1.0}  # greedy: p one-hot
        assert ((t.columns["suffix_prob"] > 0) & (t.columns["suffix_prob"] <= 1)).all()
    branching = [t.columns["sibling"].max() for t in tables.values()]
    assert max(branching) >= 1  # the library's trees branch somewhere on these texts
    # lossless: the same texts as the chain harvest's greedy decoding (the target's own greedy text)
    chain = llama_files["root"] / "suffix-chain-greedy"
    _harvest(llama_files, repeating, chain, temperature=0.0)
    texts = [json.loads(line) for line in (greedy_trees / "texts.jsonl").read_text().splitlines()]
    plain = {r["seq_id"]: r["completion_ids"] for r in map(json.loads, (chain / "texts.jsonl").read_text().splitlines())}
    assert texts and all(r["completion_ids"] == plain[r["seq_id"]] for r in texts)


def test_shapes_read_the_suffix_trees_estimates(greedy_trees):
    """On a deterministic tree a shape's draft_prob and draft_cumprob (and the expansion priority) are the suffix
    trees' estimates, while the acceptance stays the one-hot q's R_s(x)."""
    from evolve.eval.tree_scoring import shape_data

    table = load_trees(greedy_trees, "train")
    assert table.deterministic
    data = shape_data(table)
    nodes = np.flatnonzero(data.depth > 0)
    np.testing.assert_array_equal(data.decisions.feature("draft_prob")[nodes], table.columns["suffix_prob"])
    np.testing.assert_array_equal(data.priority[nodes], table.columns["suffix_cumprob"])
    np.testing.assert_array_equal(data.accept[nodes], table.columns["residual_prob"])
    assert (table.columns["suffix_prob"] < 1).any()


#: Prompts (token ids of the tiny models) that repeat themselves, so that the request's own suffix tree matches.
PROMPTS = ([7, 12, 3, 9, 7, 12, 3, 9, 7, 12], [5, 9, 4, 5, 9, 4, 5], [4, 8, 4, 8, 4])
MAX_NEW = 14


def _engine(files, temperature):
    config = harvest_config(files, files["root"] / "unused", suffix=(16, 50), temperature=temperature, seed=5,
                            max_new_tokens=MAX_NEW, threads=1)
    return hv.build(config).engine


def test_live_suffix_trees_are_lossless_and_decode_the_harvests_text(llama_files):
    require("arctic_inference.suffix_decoding")
    from evolve.harvest.tree_harvest import generate_tree_text
    from evolve.live.decoding import autoregressive_text
    from evolve.live.tree_decoding import FIXED, TreeDecoder, tree_text
    from heuristics.contract import Rule

    engine = _engine(llama_files, 0.0)
    shared = engine.drafter
    one_below = TreeDecoder("two_then_one", Rule("s", expression="if_gt(0.5, draft_index, 2.0, 1.0)",
                                                 kind="tree-shape").program)
    drafted = 0
    for i, prompt in enumerate(PROMPTS):
        plain = autoregressive_text(engine, list(prompt), MAX_NEW, hv.text_rng(5, i))[0]
        for shape in (FIXED, one_below):
            engine.drafter = shared.fresh()
            ids, counts = tree_text(engine, shape, list(prompt), (8, 3), MAX_NEW, hv.text_rng(5, i))
            assert ids == plain, shape.name
            assert abs(counts.expected_tokens - counts.tokens) < 1e-9  # greedy: every outcome is certain
            drafted += counts.tokens - counts.target_calls
    assert drafted > 0  # some drafts were accepted
    engine = _engine(llama_files, 1.0)
    shared = engine.drafter
    for i, prompt in enumerate(PROMPTS):
        engine.drafter = shared.fresh()
        harvested, _ = generate_tree_text(engine, list(prompt), hv.text_rng(11, i), 8, 3, MAX_NEW)
        engine.drafter = shared.fresh()
        ids, counts = tree_text(engine, FIXED, list(prompt), (8, 3), MAX_NEW, hv.text_rng(11, i))
        assert ids == harvested.tokens and counts.target_calls == harvested.target_calls


def test_live_decision_rows_are_the_tree_scorers(llama_files):
    require("arctic_inference.suffix_decoding")
    import torch

    from evolve.engine.runner import BatchKV
    from evolve.engine.suffix_tree import draft_tree
    from evolve.eval.tree_scoring import shape_data
    from evolve.live.tree_decoding import decision_data

    engine = _engine(llama_files, 1.0)
    prompt = list(PROMPTS[0])
    engine.drafter.open_text(prompt)
    with torch.inference_mode():
        kv = BatchKV(1, engine.device)
        kv.place(0, engine.run.prefill(prompt[:-1]), len(prompt) - 1)
        step = engine.drafter.tree_step(engine, kv, prompt, np.random.default_rng(0), 8, 3, 5)
    tree, est = draft_tree(engine.drafter, prompt, 8, 3, 5, engine.eos)
    assert tree.n == step.tree.n > 1 and tree.tokens == step.tree.tokens
    n = tree.n
    frame = pd.DataFrame({**step.columns, "seq_id": np.zeros(n, dtype=np.int64), "tree": np.zeros(n, dtype=np.int64),
                          "position": np.full(n, 3, dtype=np.int64)})
    offline = shape_data(trees_from_frame(frame))
    live = decision_data(tree, 3, est)
    np.testing.assert_array_equal(live.decisions.X, offline.decisions.X)
    np.testing.assert_array_equal(live.priority, offline.priority)


def test_a_sampled_suffix_tree_harvest_and_the_trees_command(llama_files, repeating, tmp_path):
    require("arctic_inference.suffix_decoding")
    out = tmp_path / "sampled"
    _harvest(llama_files, repeating, out, temperature=1.0, tree_nodes=6, tree_width=2)
    table = load_trees(out, "train")
    assert table.rows > 0 and (table.columns["residual_prob"] <= 1).all()
    first = table.columns["sibling"] == 0
    np.testing.assert_array_equal(table.columns["residual_prob"][first], table.columns["target_prob"][first])
    res = CliRunner().invoke(benchmark_cli, ["trees", "--data", str(out), "--split", "test"])
    assert res.exit_code == 0, res.output
    assert "specinfer" in res.output and "chain" in res.output


def test_suffix_trees_need_the_torch_backend(llama_files, repeating, tmp_path):
    require("arctic_inference.suffix_decoding")
    from evolve.errors import InputError

    config = harvest_config(llama_files, tmp_path / "o", prompts=str(repeating), suffix=(16,), tree_nodes=4,
                            temperature=0.0, backend="llama_cpp")
    with pytest.raises(InputError, match="torch backend"):
        config.check()


def test_a_suffix_tree_shape_is_not_exported_as_plain_decoding(greedy_trees, tmp_path):
    """vLLM drafts suffix decoding's chains only: a tree shape evolved on suffix trees is refused in one line naming the
    nearest setting, not written as plain decoding."""
    from evolve.cli.evolve import cli as evolve_cli

    costs = Path(__file__).resolve().parent.parent / "docs" / "costs" / "gpu_like.json"
    res = CliRunner().invoke(evolve_cli, ["run", "--data", str(greedy_trees), "--out", str(tmp_path), "--evolve",
                                          "tree-shape", "--objective", "tokens_per_second", "--costs", str(costs),
                                          "--population", "20", "--generations", "1", "--seed", "1", "--no-progress"])
    assert res.exit_code == 0, res.output
    champion = next(tmp_path.glob("run-*/champion.json"))
    res = CliRunner().invoke(evolve_cli, ["export", str(champion), "--to", "vllm", "--output", str(tmp_path / "v.yaml")])
    assert res.exit_code == 2 and "expresses no draft-tree shape with suffix decoding" in res.output, res.output
    assert "Traceback" not in res.output and not (tmp_path / "v.yaml").exists()
