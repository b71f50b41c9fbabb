"""Harvest genuine speculative-decoding traces from local causal language models.

``python generate_data.py harvest --target PATH (--draft PATH | --draft-skip-layers LIST |
--draft-window SINK,RECENT) --prompts FILE`` runs real speculative sampling (Leviathan et al.
2023, arXiv 2211.17192; Chen et al. 2023, arXiv 2302.01318) with a local target model and a
drafter, and writes one schema-v1 record (:mod:`data.schema`) for every drafted token.

This module holds the decode loop (:class:`SpeculativeEngine`) and the harvest itself
(:func:`build`, :func:`harvest`); it is the package's entry point, so it also exposes the
option parsers of :mod:`data.harvest.config`. The parts live in :mod:`data.harvest.config`
(settings), :mod:`data.harvest.models` (loading local models), :mod:`data.harvest.drafters`
(the three drafters), :mod:`data.harvest.runner` (forward passes on a KV cache),
:mod:`data.harvest.distributions` (the numbers of one block), :mod:`data.harvest.prompts`
(prompts and splits) and :mod:`data.harvest.resume` (part files, resume, the final dataset).

One block (:meth:`SpeculativeEngine.block`)
-------------------------------------------
The drafter proposes ``k <= gamma`` tokens autoregressively, each sampled from its own
distribution q given the context and its earlier drafts (drafting stops early at an
end-of-sequence token). The target scores the context plus all drafts in one pass, giving p at
every depth and the bonus distribution. Each depth i gets a fresh u_i ~ U[0, 1) (``rand_value``);
the standard rule accepts while u_i < min(1, p_i(x_i)/q_i(x_i)); at the first rejection j the
next token is sampled from the residual norm(max(0, p_j - q_j)), after k acceptances from the
bonus distribution p_{k+1}. So the emitted text is distributed exactly as the target's.
One record is written for every drafted token, including those after the first rejection
(other rules may accept them); ``baseline_accepts`` is the standard rule's outcome on the
record's own ``rand_value``, exactly as :func:`data.schema.validate` checks it.

Distributions are softmax(logits / T) computed in float64 over the first ``V`` logits, where
``V`` is the smaller of the two models' output sizes (ids past it can never be drafted or
sampled; the tokenizers must agree below it and prompts must encode below it); T = 0 means
greedy decoding (one-hot at the arg max, lowest id on ties). Entropies are in nats.

Random numbers, per text, from ``numpy.random.default_rng([seed, text_index])`` in a fixed
order per block: k draft-sampling uniforms, k acceptance uniforms, one uniform for the
residual or bonus token. Sampling is by inverse CDF on the float64 distribution. A text's
records therefore depend only on (models, options, seed, text index), which is what makes a
resumed run identical to an uninterrupted one (given the same torch build, device and thread
count, since the logits come from torch).

Columns: ``seq_id`` = text index (0-based, among the non-blank lines of the prompts file),
``position`` = index in the generated continuation of the token being drafted (the positions
of the records after a rejection repeat in the next block, as they should), ``draft_index``
= depth 0..k-1.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from data.errors import InputError  # noqa: F401 (exposed with the option parsers)
from data.harvest.config import HarvestConfig, parse_layer_list, parse_window  # noqa: F401 (exposed)
from data.harvest.distributions import block_records, distributions, residual_distribution, sample_index
from data.harvest.drafters import Drafter, ModelDrafter, SkipLayerDrafter, WindowDrafter
from data.harvest.models import (
    LoadedModel, _torch, check_rollback, check_same_tokenizer, eos_ids, load_model, resolve_model, sha256_file,
)
from data.harvest.progress import ProgressBar, stderr_console
from data.harvest.prompts import assign_splits, encode_prompt, processing_order, read_prompts
from data.harvest.resume import (
    COLUMN_ORDER, GENERATOR, MANIFEST_FILE, WORK_DIR, check_out_dir, consolidate, fingerprint, part_path, write_part,
)
from data.harvest.runner import TextState, _crop_cache, _new_cache, _Runner
from data.io import atomic_write_text
from data.schema import COLUMNS
from data.synth.generate import check_output_dir


@dataclass
class BlockResult:
    """One speculation block: drafts, the number the standard rule accepted, the emitted tokens
    and the records (columns without ``seq_id``/``position``)."""

    start: int
    drafts: list[int]
    accepted: int
    emitted: list[int]
    records: dict[str, np.ndarray]


@dataclass
class TextResult:
    """A generated text: continuation ids, why it stopped (``eos``/``length``), its blocks and
    the number of target passes after the prefill."""

    tokens: list[int]
    finish: str
    blocks: list[BlockResult]
    target_calls: int

    def frame(self, seq_id: int) -> pd.DataFrame:
        """The text's records as a schema DataFrame (columns in schema order)."""
        cols: dict[str, list] = {}
        for b in self.blocks:
            k = len(b.drafts)
            parts = dict(b.records, seq_id=np.full(k, seq_id, dtype=np.int64),
                         position=np.arange(b.start, b.start + k, dtype=np.int64))
            for name, values in parts.items():
                cols.setdefault(name, []).append(values)
        if not cols:
            return pd.DataFrame({c: pd.Series(dtype=_dtype(c)) for c in COLUMN_ORDER})
        return pd.DataFrame({c: np.concatenate(cols[c]) for c in COLUMN_ORDER})


def _dtype(col: str) -> str:
    kind = next(c.kind for c in COLUMNS if c.name == col)
    return {"int": "int64", "float": "float64", "bool": "bool"}[kind]


class SpeculativeEngine:
    """Target model + drafter: runs speculative sampling and records every drafted token.

    Args: target (LoadedModel), drafter (:class:`Drafter`), temperature (>= 0), vocab V (number
    of logits used; covers the tokenizer), eos (set of end-of-sequence ids), device.
    """

    def __init__(self, target: LoadedModel, drafter: Drafter, temperature: float, vocab: int,
                 eos: set[int], device: str = "cpu"):
        self.target = target
        self.drafter = drafter
        self.temperature = float(temperature)
        self.vocab = vocab
        self.eos = set(eos)
        self.run = _Runner(target.model, vocab, device)

    def start(self, prompt_ids: Sequence[int]) -> TextState:
        """Prefill the target (and drafter) caches with the prompt minus its last token."""
        ctx = [int(t) for t in prompt_ids]
        state = TextState(ctx=ctx, prompt_len=len(ctx), cache=_new_cache(), cache_len=0)
        if len(ctx) > 1:
            self.run(ctx[:-1], 0, state.cache, 1)
            state.cache_len = len(ctx) - 1
        self.drafter.start(self, state)
        return state

    def block(self, state: TextState, k: int, rng: np.random.Generator) -> BlockResult:
        """One speculation block with up to k drafts; advances ``state`` by the standard rule.

        Random draws, in order: the drafts' sampling uniforms, k' acceptance uniforms, one uniform
        for the residual/bonus token. Returns the :class:`BlockResult`.
        """
        L = len(state.ctx)
        drafts, q, q_ent = self.drafter.propose(self, state, k, rng)
        k = len(drafts)
        feed = state.ctx[state.cache_len:] + drafts
        logits = self.run(feed, state.cache_len, state.cache, k + 1)
        p, p_ent = distributions(logits, self.temperature)
        u = rng.random(k)
        u_next = rng.random()
        records = block_records(p[:k], q, p_ent[:k], q_ent, drafts, u)
        rejected = np.flatnonzero(~records["baseline_accepts"])
        n = int(rejected[0]) if rejected.size else k
        if n < k:
            nxt = sample_index(residual_distribution(p[n], q[n]), u_next)
        else:
            nxt = sample_index(p[k], u_next)
        emitted = drafts[:n] if (n == k and drafts[-1] in self.eos) else drafts[:n] + [nxt]
        _crop_cache(state.cache, L + n)
        state.cache_len = L + n
        self.drafter.commit(self, state, L + n)
        state.ctx.extend(emitted)
        return BlockResult(L - state.prompt_len, list(drafts), n, emitted, records)

    def target_step(self, state: TextState, rng: np.random.Generator) -> int:
        """Sample one token from the target alone (used when one token of budget is left)."""
        logits = self.run(state.ctx[state.cache_len:], state.cache_len, state.cache, 1)
        p, _ = distributions(logits, self.temperature)
        tok = sample_index(p[0], rng.random())
        state.cache_len = len(state.ctx)
        state.ctx.append(tok)
        return tok

    def generate(self, prompt_ids: Sequence[int], gamma: int, max_new_tokens: int, rng: np.random.Generator,
                 on_block: Callable[[int], None] | None = None) -> TextResult:
        """Generate one text of at most ``max_new_tokens`` tokens by speculative sampling.

        Block sizes are min(gamma, remaining - 1) so the budget is never exceeded; with one token
        left the target samples it alone (no record). Stops after an end-of-sequence token.
        ``on_block(n_emitted)`` is called after every block (progress).
        """
        import torch

        with torch.inference_mode():
            state = self.start(prompt_ids)
            blocks: list[BlockResult] = []
            calls = 0
            finish = "length"
            while True:
                generated = len(state.ctx) - state.prompt_len
                remaining = max_new_tokens - generated
                if remaining <= 0:
                    break
                if remaining == 1:
                    emitted = [self.target_step(state, rng)]
                else:
                    b = self.block(state, min(gamma, remaining - 1), rng)
                    blocks.append(b)
                    emitted = b.emitted
                calls += 1
                if on_block is not None:
                    on_block(len(emitted))
                if emitted and emitted[-1] in self.eos:
                    finish = "eos"
                    break
        return TextResult(state.ctx[state.prompt_len:], finish, blocks, calls)


# ----------------------------------------------------------------------------- harvest

@dataclass
class Setup:
    """Loaded models, drafter and engine for a :class:`HarvestConfig`, plus what metadata needs."""

    config: HarvestConfig
    target: LoadedModel
    draft: LoadedModel | None
    engine: SpeculativeEngine
    description: dict[str, Any]


def build(config: HarvestConfig) -> Setup:
    """Resolve and load the models, check the tokenizer, build the drafter and the engine.

    Raises: InputError for missing paths or weights, a tokenizer mismatch, layer indices or a
    window that do not fit the target, an unsupported architecture.
    """
    config.check()
    target_src = resolve_model(config.target, "--target")
    if config.threads is not None:
        torch, _ = _torch()
        torch.set_num_threads(config.threads)
    draft_src = resolve_model(config.draft, "--draft") if config.draft is not None else None
    target = load_model(target_src, config.dtype, config.device)
    draft = load_model(draft_src, config.dtype, config.device) if draft_src is not None else None
    for loaded in (target, draft):
        if loaded is not None:
            check_rollback(loaded)
    vocab = target.vocab_out
    if draft is not None:
        vocab = min(vocab, draft.vocab_out)
        check_same_tokenizer(target, draft, vocab)
    if draft is not None:
        drafter: Drafter = ModelDrafter(draft, vocab, config.device)
    elif config.skip_layers is not None:
        drafter = SkipLayerDrafter(target, config.skip_layers, vocab, config.device)
    else:
        drafter = WindowDrafter(target, *config.window, vocab, config.device)
    eos = eos_ids(target)
    engine = SpeculativeEngine(target, drafter, config.temperature, vocab, eos, config.device)
    description = {
        "target": {"path": str(target_src.path), "format": target_src.kind, "architecture": target.architecture,
                   "sha256": target_src.hashes()},
        "drafter": dict(drafter.settings(), **({"sha256": draft_src.hashes()} if draft_src else {})),
        "vocab_size": vocab,
        "eos_token_ids": sorted(eos),
        "chat_template": bool(getattr(target.tokenizer, "chat_template", None)),
    }
    return Setup(config, target, draft, engine, description)


def text_rng(seed: int, index: int) -> np.random.Generator:
    """The random stream of text ``index``: ``numpy.random.default_rng([seed, index])``."""
    return np.random.default_rng([seed, index])


@dataclass
class HarvestResult:
    """Outcome of :func:`harvest`: done/total texts, whether it was interrupted and whether the
    dataset files were (re)written, the per-split statistics and the output directory."""

    out: Path
    texts_done: int
    texts_total: int
    interrupted: bool
    consolidated: bool
    stats: dict[str, dict]
    tokens_generated: int
    seconds: float


def harvest(config: HarvestConfig, progress: bool = True,
            on_text_done: Callable[[int], None] | None = None,
            console=None) -> HarvestResult:
    """Run (or resume) a harvest and write the dataset into ``config.out``.

    Args:
        config: the options (see :class:`HarvestConfig`).
        progress: show a rich progress bar (texts, tokens, tokens per second) on ``console``
            (default: stderr).
        on_text_done: called with the text index after each text is safely on disk.

    Returns: :class:`HarvestResult`. A KeyboardInterrupt stops the harvest between blocks: the
    text in progress is dropped (it is redone on resume) and the finished ones are consolidated
    into a valid dataset (if every split has a finished text); ``interrupted`` is then True.

    Raises: InputError for bad options or files (see :func:`build`, :func:`read_prompts`,
    :func:`assign_splits`), or an output directory holding other data or other settings.
    """
    config.check()
    prompts, lines = read_prompts(config.prompts)
    splits = assign_splits(len(prompts), config.seed)
    prompts_sha = sha256_file(config.prompts)
    out = check_output_dir(config.out)
    work = out / WORK_DIR
    check_out_dir(out, work, None)
    console = console or stderr_console()
    if progress and console.is_terminal:
        console.print(f"harvest: loading and hashing the models ({config.target}"
                      f"{', ' + config.draft if config.draft else ''})", soft_wrap=True)
    setup = build(config)
    settings = fingerprint(config, setup.description, prompts_sha)
    check_out_dir(out, work, settings)
    tokenizer = setup.target.tokenizer
    encoded = [encode_prompt(tokenizer, p, f"option '--prompts': {config.prompts}, line {ln}", setup.engine.vocab)
               for p, ln in zip(prompts, lines)]
    atomic_write_text(work / MANIFEST_FILE, json.dumps(
        {"generator": GENERATOR, "fingerprint": settings, "texts_total": len(prompts)}, indent=2))
    split_of = {t: name for name, idx in splits.items() for t in idx}
    order = processing_order(splits)
    todo = [t for t in order if not part_path(work, t).exists()]
    done_before = len(order) - len(todo)

    t0 = time.perf_counter()
    tokens = 0
    interrupted = False
    bar = ProgressBar(console, len(order), done_before, enabled=progress)
    try:
        with bar:
            for t in todo:
                def on_block(n: int) -> None:
                    nonlocal tokens
                    tokens += n
                    bar.tokens(tokens, time.perf_counter() - t0)

                result = setup.engine.generate(encoded[t], config.gamma, config.max_new_tokens,
                                               text_rng(config.seed, t), on_block)
                info = {"seq_id": t, "split": split_of[t], "line": lines[t], "prompt": prompts[t],
                        "completion": tokenizer.decode(result.tokens, skip_special_tokens=False),
                        "completion_ids": result.tokens, "prompt_tokens": len(encoded[t]),
                        "tokens": len(result.tokens), "finish": result.finish,
                        "target_calls": result.target_calls, "blocks": len(result.blocks)}
                write_part(part_path(work, t), result.frame(t), info)
                bar.text_done()
                if on_text_done is not None:
                    on_text_done(t)
    except KeyboardInterrupt:
        interrupted = True
    seconds = time.perf_counter() - t0
    consolidated, stats, n_done = consolidate(out, config, setup.description, splits, prompts_sha,
                                              run_seconds=seconds, run_tokens=tokens)
    return HarvestResult(out, n_done, len(order), interrupted, consolidated, stats, tokens, seconds)
