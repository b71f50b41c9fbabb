"""The tree harvest (``generate_data.py harvest ... --tree-nodes N --tree-width K``; docs/reference/trees.md).

The tiny random Llama models of the harvest tests (tests/harvest_helpers.py, the ``llama_files`` fixture) are
used; nothing is downloaded.
"""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("scipy.stats")

from evolve.errors import InputError  # noqa: E402
from evolve.engine.distributions import distributions  # noqa: E402
from evolve.engine.runner import BatchKV  # noqa: E402
from evolve.engine.tree_draft import grow_tree, tree_step  # noqa: E402
from evolve.harvest import loop as hv  # noqa: E402
from evolve.harvest import tree_harvest as ht  # noqa: E402
from evolve.traces.io import SPLITS, load_dataset, load_metadata  # noqa: E402
from evolve.traces.tree_tables import RELAX_COLUMN_NAMES, TREE_COLUMNS, TREE_COLUMN_NAMES, load_trees  # noqa: E402

from harvest_helpers import chi2_pvalue, harvest_config, run_harvest, stop_after  # noqa: E402

#: Tiny models run fastest (and identically) on one thread (the fixture is in conftest.py).
pytestmark = pytest.mark.usefixtures("one_thread")

NODES, WIDTH = 6, 2
EOS = 2  # </s> of the word tokenizer


def _config(files, out, **kw):
    base = dict(draft=files["draft"], tree_nodes=NODES, tree_width=WIDTH)
    base.update(kw)
    return harvest_config(files, out, **base)


@pytest.fixture(scope="module")
def tree_data(llama_files):
    """A tree harvest of the ten prompts with the draft model (N = 6, K = 2): (out dir, result)."""
    out = llama_files["root"] / "trees-ref"
    return out, hv.harvest(_config(llama_files, out), progress=False)


def _trees(out) -> dict[str, pd.DataFrame]:
    return {s: pd.read_parquet(out / f"{s}.trees.parquet") for s in SPLITS}


def _path(parent, tokens, i) -> list[int]:
    """The tokens on the path root -> node i (node i last)."""
    path = []
    while i >= 0:
        path.append(int(tokens[i]))
        i = int(parent[i])
    return path[::-1]


def _by_tree(df: pd.DataFrame):
    """Yield the rows of each tree (seq_id, tree) in file order."""
    for _, rows in df.groupby(["seq_id", "tree"], sort=False):
        yield rows


# ----------------------------------------------------------------------------- the table


@pytest.mark.filterwarnings("ignore::evolve.errors.InputWarning")  # tiny valid/test splits
def test_tree_table_shape_and_split_assignment(tree_data):
    out, result = tree_data
    assert result.texts_done == result.texts_total == 10 and result.consolidated
    chains = load_dataset(out)  # the chain records are an ordinary valid dataset
    meta = load_metadata(out)
    assert meta["tree"]["nodes"] == NODES and meta["tree"]["width"] == WIDTH and "growth" in meta["tree"]
    assert meta["config"]["tree_nodes"] == NODES
    for name, df in _trees(out).items():
        assert list(df.columns) == list(TREE_COLUMN_NAMES + RELAX_COLUMN_NAMES)
        assert {c.name: str(df[c.name].dtype) for c in TREE_COLUMNS} == {c.name: c.dtype for c in TREE_COLUMNS}
        table = load_trees(out, name)  # the table's own checks (grouping, parents, siblings, cumprob, per-tree columns)
        # relaxed verification's columns ride along: at w = 0 the mixture is p, so R~_s(x) = R_s(x)
        assert table.relaxable
        np.testing.assert_allclose(table.columns["relaxed_residual_prob"][:, 0], table.columns["residual_prob"],
                                   rtol=1e-12, atol=1e-15)
        assert set(df["seq_id"]) == set(meta["splits"][name]) == set(np.unique(chains[name]["seq_id"]))
        stats = meta["statistics"][name]["trees"]
        assert stats["nodes"] == len(df) and stats["trees"] == len(df.groupby(["seq_id", "tree"]))
        n_trees = 0
        for rows in _by_tree(df):
            n_trees += 1
            n = len(rows)
            node, parent = rows["node"].to_numpy(), rows["parent"].to_numpy()
            depth, sibling = rows["depth"].to_numpy(), rows["sibling"].to_numpy()
            children, tokens = rows["children"].to_numpy(), rows["token"].to_numpy()
            assert 1 <= n <= NODES and (node == np.arange(n)).all() and (parent < node).all()
            assert (depth == np.where(parent < 0, 1, depth[np.maximum(parent, 0)] + 1)).all()
            assert (children <= WIDTH).all() and rows["root_children"].iat[0] <= WIDTH
            for par in np.unique(parent):
                kids = np.flatnonzero(parent == par)
                assert (np.diff(kids) == 1).all() and (sibling[kids] == np.arange(kids.size)).all()
                if par >= 0:
                    assert children[par] == kids.size
                    assert tokens[par] != EOS  # an end-of-sequence node is never expanded
            assert (children[np.setdiff1d(np.arange(n), parent)] == 0).all()
            assert rows["root_children"].iat[0] == int((parent < 0).sum())
            assert (rows["tree_nodes"] == n).all()
        # the chain records: one block per tree, its first path
        blocks = int((chains[name]["draft_index"] == 0).sum())
        assert blocks == n_trees


def test_residual_and_exact_expected_tokens_from_the_rows(tree_data):
    """residual_prob of sibling 0 is target_prob; SpecInfer's expected tokens recomputed from the rows alone
    (a = min(1, residual_prob / draft_prob), P(node) = P(parent) prod_(earlier siblings) (1 - a) * a) equal
    specinfer_tokens; traversal's lie in [1, 1 + depth]."""
    out, _ = tree_data
    checked = 0
    for df in _trees(out).values():
        first = df["sibling"] == 0
        np.testing.assert_array_equal(df.loc[first, "residual_prob"], df.loc[first, "target_prob"])
        for rows in _by_tree(df):
            parent = rows["parent"].to_numpy()
            a = np.minimum(1.0, rows["residual_prob"].to_numpy() / rows["draft_prob"].to_numpy())
            reach = np.zeros(len(rows))
            rejected: dict[int, float] = {}
            for i, par in enumerate(parent):
                before = rejected.get(par, 1.0)
                reach[i] = (1.0 if par < 0 else reach[par]) * before * a[i]
                rejected[par] = before * (1.0 - a[i])
            expected = 1.0 + reach.sum()
            assert abs(expected - rows["specinfer_tokens"].iat[0]) < 1e-9
            tv = rows["traversal_tokens"].iat[0]
            assert 1.0 <= tv <= 1.0 + rows["depth"].max() + 1e-12
            checked += 1
    assert checked > 50
    assert (pd.concat(_trees(out).values())["residual_prob"] < pd.concat(_trees(out).values())["target_prob"]).any()


def test_chain_records_are_the_first_path(tree_data):
    """Each chain block holds the tree's first path (sibling 0 at every depth): same tokens and probabilities."""
    out, _ = tree_data
    for name, df in _trees(out).items():
        chain = pd.read_parquet(out / f"{name}.parquet")
        starts = np.flatnonzero(chain["draft_index"].to_numpy() == 0)
        ends = np.append(starts[1:], len(chain))
        for (a, b), rows in zip(zip(starts, ends), _by_tree(df)):
            block = chain.iloc[a:b]
            assert block["seq_id"].iat[0] == rows["seq_id"].iat[0] and block["position"].iat[0] == rows["position"].iat[0]
            path, node = [], 0
            parent = rows["parent"].to_numpy()
            while node is not None:
                path.append(node)
                kids = np.flatnonzero(parent == node)
                node = int(kids[0]) if kids.size else None
            first = rows.iloc[path]
            np.testing.assert_array_equal(block["draft_prob"].to_numpy(), first["draft_prob"].to_numpy())
            np.testing.assert_array_equal(block["target_prob"].to_numpy(), first["target_prob"].to_numpy())


def test_tree_probabilities_match_plain_forwards(llama_files):
    """draft_prob / target_prob of every node (at its parent) and the drafter's and target's top probabilities
    at every node equal uncached plain forwards of prompt + text before the step + the path."""
    setup = hv.build(_config(llama_files, llama_files["root"] / "unused"))
    prompt = [7, 12, 3, 9]
    result, df = ht.generate_tree_text(setup.engine, prompt, np.random.default_rng(4), NODES, WIDTH, 20)
    assert len(df) >= 2 * NODES
    drafter = setup.engine.drafter.run.model

    def dist(model, ids):
        with torch.inference_mode():
            return distributions(model(input_ids=torch.tensor([ids])).logits[0, -1:, :setup.engine.vocab], 1.0)

    checked = 0
    for rows in list(_by_tree(df))[:3]:
        base = prompt + result.tokens[:int(rows["position"].iat[0])]
        parent, tokens = rows["parent"].to_numpy(), rows["token"].to_numpy()
        for i in range(len(rows)):
            ids = base + _path(parent, tokens, i)
            q_par, _ = dist(drafter, ids[:-1])
            p_par, _ = dist(setup.target.model, ids[:-1])
            q_node, h_node = dist(drafter, ids)
            p_node, _ = dist(setup.target.model, ids)
            row = rows.iloc[i]
            assert row["draft_prob"] == pytest.approx(q_par[0, tokens[i]], rel=1e-4, abs=1e-7)
            assert row["target_prob"] == pytest.approx(p_par[0, tokens[i]], rel=1e-4, abs=1e-7)
            assert row["node_draft_top_prob"] == pytest.approx(q_node[0].max(), rel=1e-4, abs=1e-7)
            assert row["node_draft_entropy"] == pytest.approx(h_node[0], rel=1e-4, abs=1e-7)
            assert row["node_target_top_prob"] == pytest.approx(p_node[0].max(), rel=1e-4, abs=1e-7)
            checked += 1
    assert checked >= 3 * 2


@pytest.mark.parametrize("kw", [{"skip_layers": (1, 2)}, {"exit_layer": 2}])
def test_self_drafters_grow_trees_on_their_own_cache(llama_files, kw):
    """Skipped layers (non-contiguous cache layers) and early exit: the nodes' q equal plain forwards."""
    setup = hv.build(_config(llama_files, llama_files["root"] / "unused", draft=None, **kw))
    prompt = [5, 9, 14]
    result, df = ht.generate_tree_text(setup.engine, prompt, np.random.default_rng(1), 5, 3, 12)
    assert len(result.tokens) >= 1 and len(df) > 0
    rows = list(_by_tree(df))[1]  # the second step: the caches have been cut back and extended once
    parent, tokens = rows["parent"].to_numpy(), rows["token"].to_numpy()
    base = prompt + result.tokens[:int(rows["position"].iat[0])]
    model = setup.engine.drafter.run.model
    with torch.inference_mode():
        for i in range(len(rows)):
            ids = base + _path(parent, tokens, i)[:-1]
            q, _ = distributions(model(input_ids=torch.tensor([ids])).logits[0, -1:, :setup.engine.vocab], 1.0)
            assert rows["draft_prob"].iat[i] == pytest.approx(q[0, tokens[i]], rel=1e-4, abs=1e-7)


def test_growth_rule_on_a_fixed_drafter():
    """The root is expanded first; each round expands the K unexpanded nodes of highest cumulative probability
    with min(K, budget left) children; end-of-sequence nodes and nodes at the depth limit stay leaves."""
    V = 5
    base = np.array([0.4, 0.3, 0.15, 0.1, 0.05])

    def draft_pass(parents, tokens):
        return np.tile(base, (len(tokens) + 1, 1)), np.zeros(len(tokens) + 1)

    # root: tokens 0 and 2 (EOS); round 1: node 0 only (node 1 is EOS), children 1 and 0 (cumprob 0.12, 0.16);
    # round 2: node 3 first (0.16 > 0.12) with 2 children, then node 2 with the 1 node left; then the final pass
    draws = iter([0.1, 0.75, 0.5, 0.2, 0.0, 0.0, 0.0])
    tree = grow_tree(draft_pass, 7, 2, 10, {2}, lambda: float(next(draws)))
    assert tree.parents == [-1, -1, 0, 0, 3, 3, 2] and tree.tokens == [0, 2, 1, 0, 0, 0, 0]
    assert tree.sibling == [0, 1, 0, 1, 0, 1, 0] and tree.depth == [1, 1, 2, 2, 3, 3, 3]
    assert tree.children == [2, 0, 1, 2, 0, 0, 0] and tree.root_children == 2
    np.testing.assert_allclose(tree.cumprob, [0.4, 0.15, 0.12, 0.16, 0.064, 0.064, 0.048])
    assert tree.first_path() == [0, 2, 6]
    assert tree.passes == 4 and tree.q_rows().shape == (8, V)
    # depth limit 1: the root's children only, no pass after the round that finds nothing to expand
    draws = iter(np.linspace(0.0, 0.99, 200))
    flat = grow_tree(draft_pass, 7, 3, 1, set(), lambda: float(next(draws)))
    assert flat.n == 3 and flat.depth == [1, 1, 1] and flat.passes == 2
    with pytest.raises(ValueError):
        grow_tree(draft_pass, 0, 2, 3, set(), lambda: 0.5)


def _wrong_verify(parents, tokens, p, q, rng):
    """SpecInfer without its residuals (after the rejections the token is drawn from p): not lossless."""
    path, row = [], 0
    while True:
        kids = [i for i, par in enumerate(parents) if par + 1 == row]
        accepted = next((c for c in kids if rng.random() < min(1.0, p[row, tokens[c]] / q[row, tokens[c]])), -1)
        if accepted < 0:
            return path, int(np.searchsorted(np.cumsum(p[row]), rng.random(), side="right"))
        path.append(accepted)
        row = accepted + 1


def test_first_emitted_token_is_distributed_as_the_target(llama_files, monkeypatch):
    """Chi-square: over many tree steps at one context, the first emitted token follows p (lossless); with the
    residuals left out of the verification the same test rejects."""
    from evolve.engine import tree_draft

    setup = hv.build(_config(llama_files, llama_files["root"] / "unused", draft=None, exit_layer=1))
    engine = setup.engine
    prompt = [7, 12, 3]

    def first_tokens(n: int) -> np.ndarray:
        with torch.inference_mode():
            kv, dkv = BatchKV(1), BatchKV(1)
            kv.place(0, engine.run.prefill(prompt[:-1]), len(prompt) - 1)
            dkv.place(0, engine.drafter.run.prefill(prompt[:-1]), len(prompt) - 1)
            first = []
            for i in range(n):
                step = tree_step(engine, kv, dkv, prompt, np.random.default_rng([9, i]), 4, 2, 5)
                first.append(step.emitted[0])
                kv.truncate(0, len(prompt) - 1)
                kv.compact()
        return np.bincount(first, minlength=engine.vocab)

    with torch.inference_mode():
        p = distributions(setup.target.model(input_ids=torch.tensor([prompt])).logits[0, -1:, :engine.vocab], 1.0)[0][0]
        q = distributions(engine.drafter.run.model(input_ids=torch.tensor([prompt])).logits[0, -1:, :engine.vocab],
                          1.0)[0][0]
    assert np.minimum(p, q).sum() < 0.8  # the residuals matter
    assert chi2_pvalue(first_tokens(300), p) > 1e-3
    monkeypatch.setattr(tree_draft, "specinfer_verify", _wrong_verify)
    assert chi2_pvalue(first_tokens(300), p) < 1e-6


# ----------------------------------------------------------------------------- reruns and resume


def test_same_seed_and_resume_give_the_same_tables(llama_files, tree_data, monkeypatch):
    ref_out, _ = tree_data
    again = llama_files["root"] / "trees-again"
    hv.harvest(_config(llama_files, again), progress=False)
    for s in SPLITS:
        pd.testing.assert_frame_equal(pd.read_parquet(again / f"{s}.trees.parquet"),
                                      pd.read_parquet(ref_out / f"{s}.trees.parquet"))

    out = llama_files["root"] / "trees-resumed"
    cfg = _config(llama_files, out)
    first = hv.harvest(cfg, progress=False, on_text_done=stop_after(2))
    assert first.interrupted and first.texts_done == 2
    steps = [0]
    real_step = ht.tree_step

    def interrupted_step(*a, **kw):  # Ctrl-C in the middle of a text
        steps[0] += 1
        if steps[0] == 40:
            raise KeyboardInterrupt
        return real_step(*a, **kw)

    monkeypatch.setattr(ht, "tree_step", interrupted_step)
    second = hv.harvest(cfg, progress=False)
    assert second.interrupted and 2 < second.texts_done < 10
    monkeypatch.setattr(ht, "tree_step", real_step)
    third = hv.harvest(cfg, progress=False)
    assert not third.interrupted and third.texts_done == 10
    for s in SPLITS:
        for name in (f"{s}.parquet", f"{s}.trees.parquet"):
            pd.testing.assert_frame_equal(pd.read_parquet(out / name), pd.read_parquet(ref_out / name))
    assert (out / "texts.jsonl").read_text() == (ref_out / "texts.jsonl").read_text()
    assert load_metadata(out)["statistics"] == load_metadata(ref_out)["statistics"]


# ----------------------------------------------------------------------------- command line


def test_cli_writes_a_tree_dataset(llama_files, tmp_path):
    code, output = run_harvest(["--target", llama_files["target"], "--draft-exit-layer", "2", "--prompts",
                                llama_files["prompts"], "--max-new-tokens", "6", "--tree-nodes", "4",
                                "--tree-width", "3", "--out", str(tmp_path / "d"), "--no-progress"])
    assert code == 0, output
    assert "E[acc. len] SpecInfer" in output and output.strip().splitlines()[-1] == str(tmp_path / "d")
    table = load_trees(tmp_path / "d", "train")
    assert table.rows > 0 and (table.columns["tree_nodes"] <= 4).all()


def test_refusals_are_one_line_errors(llama_files, tmp_path):
    t, p, d = llama_files["target"], llama_files["prompts"], llama_files["draft"]
    tree = ["--tree-nodes", "4"]
    cases = [
        (["--draft-window", "1,2", *tree], "--draft-window"),
        (["--draft-ngram", "2", *tree], "--draft-ngram"),
        (["--draft", d, "--temperature", "0", *tree], "--temperature"),
        (["--draft", d, "--backend", "llama_cpp", *tree], "--backend"),
        (["--draft", d, "--tree-width", "3"], "--tree-width"),
        (["--draft", d, "--batch-size", "2", *tree], "--batch-size"),
        (["--draft", d, "--tree-nodes", "0"], "--tree-nodes"),
    ]
    for args, needle in cases:
        code, output = run_harvest(["--target", t, "--prompts", p, "--out", str(tmp_path / "o"), "--no-progress",
                                    *args])
        lines = output.strip().splitlines()
        assert code == 2, (args, output)
        assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], (args, output)
        assert "Traceback" not in output
    with pytest.raises(InputError, match="tree_width"):
        harvest_config(llama_files, tmp_path / "o", draft=d, tree_width=3).check()
