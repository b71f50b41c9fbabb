"""One target forward over a draft tree with tree attention (:meth:`evolve.engine.runner.Runner.tree`).

Every logit row of a tree pass must equal the last logits of a plain forward of the text followed by the
path to the node; the cache afterwards must hold only the context. The tiny random Llama of the harvest
tests (tests/harvest_helpers.py, the ``llama_files`` fixture) is used; nothing is downloaded.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from evolve.engine.runner import BatchKV, Runner  # noqa: E402

#: Tiny models run fastest (and identically) on one thread (the fixture is in conftest.py).
pytestmark = pytest.mark.usefixtures("one_thread")

#: float32 tolerance of a tree row against the plain forward of its path (the tiny models' large random
#: weights amplify round-off; measured differences are about 1e-6)
ATOL = 1e-4

PROMPT = [1, 7, 12, 5, 30, 9, 3]
CONTEXT = [14, 22, 6]

#: (parents, tokens): a chain, a root with 3 children, a 2x2 tree, an uneven tree, repeated sibling tokens
TREES = {
    "chain": ([-1, 0, 1, 2], [4, 17, 9, 25]),
    "star": ([-1, -1, -1], [4, 17, 9]),
    "two_by_two": ([-1, -1, 0, 0, 1, 1], [4, 17, 9, 25, 11, 8]),
    "uneven": ([-1, 0, 0, 2, 3, -1, 5, 1], [13, 21, 6, 6, 30, 18, 13, 27]),
    "repeated": ([-1, -1, -1, 0, 1, 2, 2], [5, 5, 7, 9, 9, 9, 9]),
}


@pytest.fixture(scope="module")
def target(llama_files):
    """The loaded target model (4 layers, vocab 32, float32) and a Runner over it."""
    from evolve.engine.models import load_model, resolve_model

    loaded = load_model(resolve_model(llama_files["target"], "target"))
    return loaded.model, Runner(loaded.model, loaded.vocab_out, "cpu")


def _path_nodes(parents, i) -> list[int]:
    """The nodes on the path root -> node i (node i last)."""
    path = []
    while i >= 0:
        path.append(i)
        i = parents[i]
    return path[::-1]


def _path(parents, tokens, i) -> list[int]:
    """The tokens on the path root -> node i (node i last)."""
    return [tokens[j] for j in _path_nodes(parents, i)]


def _plain_last(model, ids) -> torch.Tensor:
    """The last next-token logits of a plain (cache-free, mask-free) forward of ``ids``."""
    with torch.inference_mode():
        return model(input_ids=torch.tensor([list(ids)])).logits[0, -1]


def _kv(runner, cached, how: str) -> BatchKV:
    """A one-row cache holding ``cached``: prefilled and placed, fed through __call__, or with holes (extra
    tokens fed, then truncated without compacting, so invalid slots sit before the tree's)."""
    kv = BatchKV(1)
    with torch.inference_mode():
        if how == "prefill":
            kv.place(0, runner.prefill(cached), len(cached))
        elif how == "call":
            runner(kv, [cached], 1)
        else:
            runner(kv, [cached + [8, 8, 8]], 1)
            kv.truncate(0, len(cached))
    return kv


@pytest.mark.parametrize("name", sorted(TREES))
@pytest.mark.parametrize("how", ["prefill", "call", "holes", "empty"])
def test_tree_rows_match_plain_forwards_of_each_path(target, name, how):
    """Row 0 is the root's distribution and row 1 + i the logits after node i, each equal (float32 round-off)
    to a plain forward of prompt + context + path; also with nothing cached (the whole text as context)."""
    model, runner = target
    parents, tokens = TREES[name]
    cached, context = (PROMPT, CONTEXT) if how != "empty" else ([], PROMPT + CONTEXT)
    kv = _kv(runner, cached, how) if cached else BatchKV(1)
    before = runner.seconds
    with torch.inference_mode():
        logits = runner.tree(kv, context, parents, tokens)
    assert runner.seconds > before
    assert logits.shape == (len(tokens) + 1, runner.vocab) and logits.dtype == torch.float32
    text = PROMPT + CONTEXT
    worst = float((logits[0] - _plain_last(model, text)).abs().max())
    for i in range(len(tokens)):
        ref = _plain_last(model, text + _path(parents, tokens, i))
        worst = max(worst, float((logits[1 + i] - ref).abs().max()))
    assert worst < ATOL, worst


@pytest.mark.parametrize("how", ["prefill", "holes", "empty"])
def test_cache_afterwards_holds_only_the_context(target, how):
    """After a tree pass the cache equals one that fed only the context (lengths, slots, positions, keys and
    values), and an ordinary pass next gives the logits of a fresh cache fed the same text."""
    model, runner = target
    parents, tokens = TREES["uneven"]
    cached, context = (PROMPT, CONTEXT) if how != "empty" else ([], PROMPT + CONTEXT)
    kv = _kv(runner, cached, how) if cached else BatchKV(1)
    ref = _kv(runner, cached, how) if cached else BatchKV(1)
    with torch.inference_mode():
        runner.tree(kv, context, parents, tokens)
        runner(ref, [context], 1)
        ref.compact()
        assert kv.lengths == ref.lengths == [len(PROMPT + CONTEXT)]
        assert kv.slots == ref.slots == len(PROMPT + CONTEXT)
        assert bool(kv.valid.all()) and torch.equal(kv.pos, ref.pos)
        for a, b in zip(kv.keys + kv.values, ref.keys + ref.values):
            assert a.shape == b.shape
            torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
        nxt = [4, 17, 9]
        got = runner(kv, [nxt], 3)
        fresh = BatchKV(1)
        want = runner(fresh, [PROMPT + CONTEXT + nxt], 3)
    assert kv.lengths == [len(PROMPT + CONTEXT + nxt)]
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    torch.testing.assert_close(got[0, -1], _plain_last(model, PROMPT + CONTEXT + nxt), atol=ATOL, rtol=0)


def test_siblings_sharing_a_position_do_not_see_each_other(target):
    """Changing a sibling's token leaves every other node's logits unchanged (bit for bit), adding a branch
    leaves them unchanged up to round-off; siblings with equal tokens get equal logits (they see the same
    context and sit at the same position)."""
    _, runner = target
    with torch.inference_mode():
        a = runner.tree(_kv(runner, PROMPT, "prefill"), CONTEXT, [-1, -1, 0, 1], [5, 5, 9, 9])
        b = runner.tree(_kv(runner, PROMPT, "prefill"), CONTEXT, [-1, -1, 0, 1], [5, 20, 9, 9])
        c = runner.tree(_kv(runner, PROMPT, "prefill"), CONTEXT, [-1, -1, 0, 1, -1, 4], [5, 20, 9, 9, 11, 3])
    torch.testing.assert_close(a[1], a[2], atol=1e-6, rtol=0)  # equal siblings, equal logits
    torch.testing.assert_close(a[3], a[4], atol=1e-6, rtol=0)  # and so their children
    # same shapes: the other rows are bit for bit equal; an extra branch changes the pass's shapes (round-off)
    assert torch.equal(a[[0, 1, 3]], b[[0, 1, 3]])
    torch.testing.assert_close(b, c[:5], atol=1e-5, rtol=0)
    assert float((a[2] - b[2]).abs().max()) > 1e-3  # the changed sibling itself does change
    assert float((a[4] - b[4]).abs().max()) > 1e-3


def test_refusals_leave_the_cache_unchanged(target):
    """A batch of 2 rows, an empty context, mismatched lengths and bad parents raise ValueError; a failing
    model discards the built cache and leaves the cache as it was."""
    _, runner = target
    with torch.inference_mode():
        two = BatchKV(2)
        runner(two, [PROMPT, PROMPT[:3]], 1)
        with pytest.raises(ValueError, match="one row"):
            runner.tree(two, CONTEXT, [-1], [4])
        kv = _kv(runner, PROMPT, "prefill")
        for context, parents, tokens in (([], [-1], [4]), (CONTEXT, [-1, 0], [4]), (CONTEXT, [0], [4]),
                                         (CONTEXT, [-1, 1], [4, 5]), (CONTEXT, [-1, -2], [4, 5])):
            with pytest.raises(ValueError):
                runner.tree(kv, context, parents, tokens)
        assert kv.lengths == [len(PROMPT)] and kv.slots == len(PROMPT)
        keys = [k.clone() for k in kv.keys]

        def broken(**kwargs):
            raise RuntimeError("boom")

        real, runner.model = runner.model, broken
        try:
            with pytest.raises(RuntimeError, match="boom"):
                runner.tree(kv, CONTEXT, [-1, 0], [4, 5])
        finally:
            runner.model = real
        assert kv.lengths == [len(PROMPT)] and kv.slots == len(PROMPT)
        assert all(torch.equal(a, b) for a, b in zip(keys, kv.keys))
        # the cache still works: the tree pass now gives the plain logits
        logits = runner.tree(kv, CONTEXT, [-1], [4])
    torch.testing.assert_close(logits[1], _plain_last(real, PROMPT + CONTEXT + [4]), atol=ATOL, rtol=0)


def test_context_only_returns_the_root_row(target):
    """No tree nodes: one row, the root's distribution, and the cache holds the context."""
    model, runner = target
    kv = _kv(runner, PROMPT, "prefill")
    with torch.inference_mode():
        logits = runner.tree(kv, CONTEXT, [], [])
    assert logits.shape == (1, runner.vocab) and kv.lengths == [len(PROMPT + CONTEXT)]
    np.testing.assert_allclose(logits[0].numpy(), _plain_last(model, PROMPT + CONTEXT).numpy(), atol=ATOL, rtol=0)


@pytest.mark.parametrize("node", [None, 2, 3, 7])
@pytest.mark.parametrize("how", ["prefill", "holes"])
def test_kept_path_equals_feeding_it_again(target, node, how):
    """A tree pass with ``keep`` and then :meth:`BatchKV.keep_path` on the path root -> ``node`` (None: no node
    accepted) leaves the cache a pass over the text and that path would leave (lengths, positions, keys and
    values), and the next pass gives a fresh cache's logits; the path's nodes need not sit in consecutive slots
    (node 7's path is nodes 0, 1, 7)."""
    model, runner = target
    parents, tokens = TREES["uneven"]
    path = [] if node is None else _path_nodes(parents, node)
    accepted = [tokens[i] for i in path]
    kv, ref = _kv(runner, PROMPT, how), _kv(runner, PROMPT, how)
    with torch.inference_mode():
        runner.tree(kv, CONTEXT, parents, tokens, keep=True)
        kv.keep_path(len(tokens), path)
        runner(ref, [CONTEXT + accepted], 1)
        ref.compact()
        assert kv.lengths == ref.lengths == [len(PROMPT + CONTEXT + accepted)]
        assert kv.slots == ref.slots and bool(kv.valid.all()) and torch.equal(kv.pos, ref.pos)
        for a, b in zip(kv.keys + kv.values, ref.keys + ref.values):
            torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
        got = runner.tree(kv, [11], [-1], [4])
    torch.testing.assert_close(got[1], _plain_last(model, PROMPT + CONTEXT + accepted + [11, 4]), atol=ATOL, rtol=0)
    with pytest.raises(ValueError, match="outside"):
        _kv(runner, PROMPT, "prefill").keep_path(2, [2])
