"""The tree harvest's decode loop (``generate_data.py harvest ... --tree-nodes N [--tree-width K]``).

Each text is decoded alone (batch of one row) by tree steps (:func:`evolve.engine.tree_draft.tree_step`):
grow a draft tree of at most N nodes, score it with one target pass, record its first path as an
ordinary chain block and every node as a row of the tree table, and advance the text by SpecInfer's
recursive rejection sampling on the whole tree (lossless). With one token of budget left the target
samples it alone (one uniform, no record, no tree), as the chain harvest does. See docs/reference/trees.md.

A drafter whose trees are deterministic (suffix decoding, :attr:`evolve.engine.drafter_base.Drafter.deterministic_trees`)
grows each tree itself (:meth:`~evolve.engine.drafter_base.Drafter.tree_step`, :mod:`evolve.engine.suffix_tree`)
between :meth:`~evolve.engine.drafter_base.Drafter.open_text` and ``close_text``; a step where it has nothing to
draft writes no rows (the text advances by the target's token).

Caches: the target's one-row :class:`evolve.engine.runner.BatchKV` is prefilled with the prompt minus
its last token; each target tree pass feeds the tokens not cached yet and leaves the cache holding
the text and the accepted path, all but the step's last emitted token (the next pass feeds it). The drafter (a second model, skipped layers or early exit; not the
window or n-gram drafters) runs on a cache of its own, kept at the text minus its last token, so every
drafter tree pass feeds at least the last token (the tree's root).
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from evolve.engine.distributions import sample_index
from evolve.engine.runner import BatchKV
from evolve.engine.tree_draft import tree_step
from evolve.harvest.results import BlockResult, TextResult
from evolve.traces.tree_tables import RELAX_COLUMNS, SUFFIX_TREE_COLUMNS, TREE_COLUMNS

def empty_tree_frame(deterministic: bool = False) -> pd.DataFrame:
    """A tree table without rows (the columns and dtypes of :data:`evolve.traces.tree_tables.TREE_COLUMNS` and
    ``RELAX_COLUMNS``, whose ``relaxed_residual_prob`` holds one list per row; for a ``deterministic`` drafter's trees
    ``SUFFIX_TREE_COLUMNS`` in place of ``RELAX_COLUMNS``)."""
    extra = SUFFIX_TREE_COLUMNS if deterministic else RELAX_COLUMNS
    return pd.DataFrame({c.name: pd.Series(dtype=c.dtype if c.dtype in ("int64", "float64") else object)
                         for c in TREE_COLUMNS + extra})


def generate_tree_text(engine, prompt_ids: Sequence[int], rng: np.random.Generator, nodes: int,
                       width: int, max_new_tokens: int, seq_id: int = 0,
                       on_step: Callable[[int], None] | None = None) -> tuple[TextResult, pd.DataFrame]:
    """Generate one text by tree steps (module doc); runs under ``torch.inference_mode``.

    Args: the engine (torch backend, a drafter that ``grows_trees``, temperature > 0 unless its trees are
    deterministic), the prompt's
    ids (at least one), the text's random stream, N >= 1 nodes and K >= 1 children per expansion, the
    text's budget (>= 1 new tokens), its ``seq_id`` (the tree table's column) and ``on_step(n_emitted)``
    called after every step.

    Returns: (the :class:`TextResult`: tokens, finish ``eos``/``length``, one chain
    :class:`BlockResult` per tree step (the first path's records; ``accepted`` is the standard rule's
    count on them), target passes; the tree table of the text, one row per drafted node with the
    columns of :data:`evolve.traces.tree_tables.TREE_COLUMNS` and ``RELAX_COLUMNS``).

    Raises: ValueError for a drafter that cannot grow a tree, or an empty prompt.
    """
    import torch

    drafter = engine.drafter
    if not getattr(drafter, "grows_trees", False):
        raise ValueError(f"a draft tree needs a drafter that can grow one (got {getattr(drafter, 'name', type(drafter).__name__)})")
    if not prompt_ids:
        raise ValueError("generate_tree_text: empty prompt")
    ctx = [int(t) for t in prompt_ids]
    prompt_len = len(ctx)
    blocks: list[BlockResult] = []
    frames: list[pd.DataFrame] = []
    calls = steps = 0
    deterministic = getattr(drafter, "deterministic_trees", False)
    with torch.inference_mode():
        kv = BatchKV(1, engine.device)
        kv.place(0, engine.run.prefill(ctx[:-1]), len(ctx) - 1)
        if deterministic:
            drafter.open_text(ctx)
        else:
            draft_kv = BatchKV(1, engine.device)
            draft_kv.place(0, drafter.run.prefill(ctx[:-1]), len(ctx) - 1)
        while True:
            generated = len(ctx) - prompt_len
            max_depth = max_new_tokens - generated - 1
            if max_depth >= 1:
                if deterministic:
                    step = drafter.tree_step(engine, kv, ctx, rng, nodes, width, max_depth)
                else:
                    step = tree_step(engine, kv, draft_kv, ctx, rng, nodes, width, max_depth)
                emitted = step.emitted
                cols = dict(step.columns, seq_id=np.full(step.tree.n, seq_id, dtype=np.int64),
                            tree=np.full(step.tree.n, steps, dtype=np.int64),
                            position=np.full(step.tree.n, generated, dtype=np.int64))
                steps += 1
                if step.tree.n:  # a deterministic drafter may have nothing to draft (no match): a step without rows
                    frames.append(pd.DataFrame({c.name: (list(cols[c.name]) if cols[c.name].ndim == 2
                                                         else cols[c.name])
                                                for c in TREE_COLUMNS + RELAX_COLUMNS + SUFFIX_TREE_COLUMNS
                                                if c.name in cols}))
                if step.chain_records is not None:
                    acc = step.chain_records["baseline_accepts"]
                    n_acc = int(np.argmin(acc)) if not acc.all() else len(acc)
                    blocks.append(BlockResult(generated, [step.tree.tokens[i] for i in step.chain], n_acc,
                                              list(emitted), step.chain_records))
            else:  # one token left: the target samples it alone
                p, _ = engine.distributions(engine.run.tree(kv, ctx[kv.lengths[0]:], [], []))
                emitted = [sample_index(p[0], rng.random())]
            ctx.extend(emitted)
            calls += 1
            if on_step is not None:
                on_step(len(emitted))
            eos = emitted[-1] in engine.eos
            if eos or len(ctx) - prompt_len >= max_new_tokens:
                if deterministic:
                    drafter.close_text(ctx)
                result = TextResult(ctx[prompt_len:], "eos" if eos else "length", blocks, calls)
                trees = pd.concat(frames, ignore_index=True) if frames else empty_tree_frame(deterministic)
                return result, trees


def run_tree_texts(engine, texts: Iterable[tuple[int, Sequence[int], np.random.Generator]],
                   nodes: int, width: int, max_new_tokens: int,
                   on_step: Callable[[int], None] | None = None) -> Iterator[tuple[int, TextResult, pd.DataFrame]]:
    """Generate ``texts`` ((index, prompt ids, random stream)) one at a time by tree steps; yields
    (index, :class:`TextResult`, tree table) as each ends (:func:`generate_tree_text`)."""
    for index, prompt_ids, rng in texts:
        result, trees = generate_tree_text(engine, prompt_ids, rng, nodes, width, max_new_tokens, index, on_step)
        yield index, result, trees


__all__ = ["empty_tree_frame", "generate_tree_text", "run_tree_texts"]
