"""Harvest genuine speculative-decoding traces from local causal language models.

``python generate_data.py harvest --target PATH (--draft PATH | --draft-skip-layers LIST |
--draft-window SINK,RECENT) --prompts FILE`` runs real speculative sampling (Leviathan et al.
2023, arXiv 2211.17192; Chen et al. 2023, arXiv 2302.01318) with a local target model and a
drafter, and writes one schema-v1 record (:mod:`evolve.traces.schema`) for every drafted token.

This module holds the decode loop (:class:`SpeculativeEngine`) and the harvest itself
(:func:`build`, :func:`harvest`); it is the package's entry point, so it also exposes the
option parsers of :mod:`evolve.harvest.config`. The parts live in :mod:`evolve.harvest.config`
(settings), :mod:`evolve.engine.models` (loading local models), :mod:`evolve.engine.drafters`
(the three drafters), :mod:`evolve.engine.runner` (forward passes on a KV cache),
:mod:`evolve.engine.distributions` (the numbers of one block), :mod:`evolve.harvest.prompts`
(prompts and splits) and :mod:`evolve.harvest.resume` (part files, resume, the final dataset).

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
record's own ``rand_value``, exactly as :func:`evolve.traces.schema.validate` checks it.

Distributions are softmax(logits / T) computed in float64 over the first ``V`` logits, where
``V`` is the smaller of the two models' output sizes (ids past it can never be drafted or
sampled; the tokenizers must agree below it and prompts must encode below it), truncated by
top-k and top-p when given (:func:`evolve.engine.distributions.distributions`), for both models;
T = 0 means greedy decoding (one-hot at the arg max, lowest id on ties). Entropies are in nats.

Batches (:meth:`SpeculativeEngine.run_texts`): up to ``batch_size`` texts are decoded together
in one left-padded batch with per-row KV cache lengths and masks (:mod:`evolve.engine.runner`);
every row has its own block boundaries and block size, and a finished text's row takes the next
prompt at once. Every model pass serves all rows; the numbers of each row are then computed as
for a single text.

Random numbers, per text, from ``numpy.random.default_rng([seed, text_index])`` in a fixed
order per block: k draft-sampling uniforms, k acceptance uniforms, one uniform for the
residual or bonus token. Sampling is by inverse CDF on the float64 distribution. A text's
records therefore depend only on (models, options, seed, text index), up to the round-off of
the logits (which come from torch: same torch build, device and thread count assumed). At batch
size 1 that makes a resumed run identical to an uninterrupted one, and a rerun with the same
options is identical at any batch size. Otherwise a text shares its batch with other texts (after
a resume, or at another batch size) and its records agree up to float round-off only: a batched
matrix product rounds differently in the last bits (records agree to about 1e-6), and a draw
that falls on a boundary of the inverse CDF can then pick a neighbouring token, after which the
text continues differently; the datasets are identical in distribution, not bit for bit.

Draft trees (``tree_nodes``): texts are decoded one at a time by tree steps instead of blocks
(:mod:`evolve.harvest.tree_harvest`, :mod:`evolve.engine.tree_draft`, docs/reference/trees.md); the records are
those of each tree's first path, and every node goes into the tree table.

Columns: ``seq_id`` = text index (0-based: the non-blank lines of a plain prompts file, every turn of every
question of a JSON Lines one, :mod:`evolve.harvest.prompts`),
``position`` = index in the generated continuation of the token being drafted (the positions
of the records after a rejection repeat in the next block, as they should), ``draft_index``
= depth 0..k-1.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from evolve.harvest.config import HarvestConfig
from evolve.engine.distributions import Sampling, block_records, distributions, sample_index, standard_residual
from evolve.engine.backends import get_backend
from evolve.engine.drafter_base import Drafter
from evolve.engine.drafters import chosen_drafters, drafter_for
from evolve.engine.models import LoadedModel, check_same_tokenizer, context_length, eos_ids, resolve_model
from evolve.files.digest import sha256_file
from evolve.harvest.progress import ProgressBar, stderr_console
from evolve.harvest.prompts import (
    SPLITS, PromptFile, assign_question_splits, check_context, encode_prompt, processing_order, read_prompt_file,
    split_order, split_rule, turn_passes,
)
from evolve.harvest.resume import (
    GENERATOR, MANIFEST_FILE, SETTINGS_KEYS, WORK_DIR, LastRun, check_out_dir, consolidate, finished_texts,
    fingerprint, settings_fingerprint,
    part_path, tree_part_path, write_part, write_tree_part,
)
from evolve.engine.runner import BatchKV, Runner
from evolve.harvest.results import BlockResult, TextResult
from evolve.engine.threads import apply_threads
from evolve.files.atomic import atomic_write_text
from evolve.traces.synth.generate import check_output_dir


@dataclass
class TextState:
    """Decoding state of the text in one batch row: its index, context ids (prompt + generated),
    prompt length, random stream, finished blocks and target passes so far."""

    index: int
    ctx: list[int]
    prompt_len: int
    rng: np.random.Generator
    blocks: list[BlockResult] = field(default_factory=list)
    target_calls: int = 0

    @property
    def generated(self) -> int:
        return len(self.ctx) - self.prompt_len


@dataclass
class Batch:
    """Up to B texts decoded together: ``rows[i]`` (None when free), the target's KV cache and the
    draft model's (model drafter only); see :mod:`evolve.engine.runner`."""

    rows: list[TextState | None]
    kv: BatchKV
    draft_kv: BatchKV | None = None


class SpeculativeEngine:
    """Target model + drafter: runs speculative sampling on batches of texts and records every drafted token.

    Args: target (LoadedModel), drafter (:class:`Drafter`), sampling (:class:`Sampling`: temperature,
    top-k and top-p, applied to both models by :func:`distributions`), vocab V (number of logits used;
    covers the tokenizer), eos (set of end-of-sequence ids), device, runner (the backend's target runner).
    """

    def __init__(self, target: LoadedModel, drafter: Drafter, sampling: Sampling, vocab: int,
                 eos: set[int], device: str = "cpu", runner=None):
        self.target = target
        self.drafter = drafter
        self.sampling = Sampling(float(sampling.temperature), int(sampling.top_k), float(sampling.top_p))
        self.vocab = vocab
        self.eos = set(eos)
        self.device = device
        # ``runner``: the backend's target runner (:mod:`evolve.engine.backends`); default the torch Runner
        self.run = runner if runner is not None else Runner(target.model, vocab, device)

    def distributions(self, logits) -> tuple[np.ndarray, np.ndarray]:
        """The sampling distributions (float64 (m, V), or :class:`evolve.engine.onehot.OneHot` rows at
        temperature 0) and entropies of logits (m, V) under this engine's temperature, top-k and top-p."""
        s = self.sampling
        return distributions(logits, s.temperature, s.top_k, s.top_p, sparse_greedy=True)

    def forward_seconds(self) -> float:
        """Wall seconds spent in model forward passes so far (target and drafter)."""
        return self.run.seconds + (self.drafter.run.seconds if self.drafter.run is not self.run else 0.0)

    def new_batch(self, size: int) -> Batch:
        """An empty batch of ``size`` rows."""
        return Batch([None] * size, self.new_kv(size))

    def new_kv(self, size: int):
        """An empty target cache of ``size`` rows: the runner's own cache view when it has one (llama.cpp),
        else a :class:`BatchKV`."""
        make = getattr(self.run, "new_kv", None)
        return make(size) if make is not None else BatchKV(size, self.device)

    def start(self, batch: Batch, row: int, index: int, prompt_ids: Sequence[int], rng: np.random.Generator) -> None:
        """Put text ``index`` into the free ``row``: prefill the target (and draft model) with the
        prompt minus its last token, alone (batch 1)."""
        ctx = [int(t) for t in prompt_ids]
        batch.rows[row] = TextState(index, ctx, len(ctx), rng)
        batch.kv.place(row, self.run.prefill(ctx[:-1]), len(ctx) - 1)
        self.drafter.start(self, batch, row)

    def release(self, batch: Batch, row: int) -> None:
        """Free ``row`` (its text is done or dropped; the drafter is told first, :meth:`Drafter.finish`)."""
        if batch.rows[row] is not None:
            self.drafter.finish(self, batch, row)
        batch.rows[row] = None
        for kv in (batch.kv, batch.draft_kv):
            if kv is not None:
                kv.clear(row)
                kv.compact()

    def rewind(self, batch: Batch, row: int, length: int) -> None:
        """Cut row ``row``'s context back to its first ``length`` >= 1 tokens (caches included)."""
        del batch.rows[row].ctx[length:]
        batch.kv.truncate(row, length - 1)
        batch.kv.compact()
        self.drafter.commit(self, batch, [length - 1 if i == row else None for i in range(len(batch.rows))])

    def block(self, batch: Batch, ks: Sequence[int | None]) -> list[BlockResult | None]:
        """One speculation block for every row i with ``ks[i]`` not None; advances the rows by the standard rule.

        Row i drafts up to ``ks[i]`` tokens (0: the target samples one token alone, no record).
        Random draws of a row, in order: its drafts' sampling uniforms, k acceptance uniforms, one
        uniform for the residual/bonus token. Returns the :class:`BlockResult` of each row (None
        for rows not in the block).
        """
        import torch

        rows = [i for i, (r, k) in enumerate(zip(batch.rows, ks)) if r is not None and k is not None]
        kv = batch.kv
        want = [ks[i] if i in rows else 0 for i in range(len(batch.rows))]
        proposals = self.drafter.propose(self, batch, want) if any(want) else [([], None, None)] * len(want)
        feeds = [batch.rows[i].ctx[kv.lengths[i]:] + proposals[i][0] if i in rows else []
                 for i in range(len(batch.rows))]
        m = max(len(proposals[i][0]) + 1 for i in rows)
        logits = self.run(kv, feeds, m)
        p_all, p_ent_all = self.distributions(
            torch.cat([logits[i, m - len(proposals[i][0]) - 1:] for i in rows], dim=0))
        out: list[BlockResult | None] = [None] * len(batch.rows)
        valid: list[int | None] = [None] * len(batch.rows)
        at = 0
        for i in rows:
            state, (drafts, q, q_ent) = batch.rows[i], proposals[i]
            k, L = len(drafts), len(state.ctx)
            p, p_ent = p_all[at:at + k + 1], p_ent_all[at:at + k + 1]
            at += k + 1
            u = state.rng.random(k)
            u_next = state.rng.random()
            records = block_records(p[:k], q, p_ent[:k], q_ent, drafts, u) if k else None
            if k:
                records.update(self.drafter.draft_columns(state.ctx, drafts))
            rejected = np.flatnonzero(~records["baseline_accepts"]) if k else np.zeros(0)
            n = int(rejected[0]) if rejected.size else k
            nxt = sample_index(standard_residual(p[n], q[n]) if n < k else p[k], u_next)
            emitted = drafts[:n] if (k and n == k and drafts[-1] in self.eos) else drafts[:n] + [nxt]
            kv.truncate(i, L + n)
            valid[i] = L + n
            state.ctx.extend(emitted)
            state.target_calls += 1
            out[i] = BlockResult(L - state.prompt_len, list(drafts), n, emitted, records)
        kv.compact()
        self.drafter.commit(self, batch, valid)
        return out

    def run_texts(self, texts: Iterable[tuple[int, Sequence[int], np.random.Generator]], gamma: int,
                  max_new_tokens: int, batch_size: int = 1,
                  on_block: Callable[[int], None] | None = None) -> Iterator[tuple[int, TextResult]]:
        """Generate texts by speculative sampling, ``batch_size`` at a time; yields (index, result) as each ends.

        ``texts`` yields (index, prompt ids, random stream). A free row takes the next text at once
        (continuous batching). Block sizes are min(gamma, remaining - 1) so the budget is never
        exceeded; with one token left the target samples it alone (no record). A text stops after
        an end-of-sequence token. ``on_block(n_emitted)`` is called for every row of every block.
        """
        import torch

        pending = iter(texts)
        with torch.inference_mode():
            batch = self.new_batch(batch_size)
            while True:
                for row in range(batch_size):
                    if batch.rows[row] is None:
                        nxt = next(pending, None)
                        if nxt is not None:
                            self.start(batch, row, *nxt)
                if all(r is None for r in batch.rows):
                    return
                ks = [None if r is None else min(gamma, max_new_tokens - r.generated - 1) for r in batch.rows]
                for row, res in enumerate(self.block(batch, ks)):
                    if res is None:
                        continue
                    state = batch.rows[row]
                    if res.drafts:
                        state.blocks.append(res)
                    if on_block is not None:
                        on_block(len(res.emitted))
                    eos = bool(res.emitted) and res.emitted[-1] in self.eos
                    if eos or state.generated >= max_new_tokens:
                        result = TextResult(state.ctx[state.prompt_len:], "eos" if eos else "length", state.blocks,
                                            state.target_calls)
                        self.release(batch, row)
                        yield state.index, result

    def generate(self, prompt_ids: Sequence[int], gamma: int, max_new_tokens: int, rng: np.random.Generator,
                 on_block: Callable[[int], None] | None = None) -> TextResult:
        """Generate one text of at most ``max_new_tokens`` tokens by speculative sampling (batch of one)."""
        return next(self.run_texts([(0, prompt_ids, rng)], gamma, max_new_tokens, 1, on_block))[1]


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
    backend = get_backend(config.backend)
    backend.check(config)
    target_src = resolve_model(config.target, "target")
    apply_threads(config.threads)  # None: 1 thread on a machine with <= 2 cores (evolve.engine.threads)
    (chosen,) = chosen_drafters(config)
    draft_src = resolve_model(config.draft_model, chosen.field) if chosen.draft_model else None
    target = backend.load(target_src, config)
    draft = backend.load(draft_src, config) if draft_src is not None else None
    for loaded in (target, draft):
        if loaded is not None:
            backend.check_rollback(loaded)
    vocab = target.vocab_out
    if draft is not None:
        vocab = min(vocab, draft.vocab_out)
        check_same_tokenizer(target, draft, vocab)
    drafter: Drafter | None = backend.drafter(config, draft, vocab)  # None: the torch drafters below
    if drafter is None:
        drafter = drafter_for(config, target, draft, vocab)
    eos = eos_ids(target)
    engine = SpeculativeEngine(target, drafter, Sampling(config.temperature, config.top_k, config.top_p), vocab, eos,
                               config.device, runner=backend.runner(target, vocab, config))
    description = {
        "target": {"path": str(target_src.path), "format": target_src.file_format,
                   "architecture": backend.architecture(target), "sha256": target_src.hashes(),
                   **({"backend": backend.name} if backend.name != "torch" else {})},
        "drafter": dict(drafter.settings(), **({"sha256": draft_src.hashes()} if draft_src else {})),
        "vocab_size": vocab,
        "eos_token_ids": sorted(eos),
        "chat_template": bool(getattr(target.tokenizer, "chat_template", None)),
    }
    return Setup(config, target, draft, engine, description)


def prompt_room(config: HarvestConfig, target: LoadedModel) -> tuple[int | None, int | None]:
    """(the most tokens a prompt may have, the target's context length; None, None when the target names no
    context): the context less the tokens generated and the drafts of one target call (a block of ``gamma``, or a
    tree of ``tree_nodes``), so that no position beyond the target's context is ever scored."""
    context = context_length(target)
    if context is None:
        return None, None
    return context - config.max_new_tokens - (config.tree_nodes or config.gamma), context


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


def prepare(config: HarvestConfig) -> tuple[PromptFile, dict, str, Path, Path]:
    """Everything a harvest checks and reads before loading a model: the options, the prompts
    (:class:`evolve.harvest.prompts.PromptFile`, the ``categories`` selected), their split assignment, the
    prompts file's SHA-256, and the output and work directories (checked: writable, not an input, holding
    nothing else).

    Returns: (prompts, splits, prompts_sha, out, work).
    Raises: InputError as :func:`evolve.harvest.prompts.read_prompt_file`,
    :func:`evolve.harvest.prompts.assign_question_splits`, :meth:`evolve.harvest.prompts.PromptFile.select` and
    the output checks.
    """
    config.check()
    prompts = read_prompt_file(config.prompts).select(config.categories)
    splits = assign_question_splits(prompts, config.seed)
    prompts_sha = sha256_file(config.prompts)
    out = check_output_dir(config.out, (config.target, config.draft_model, config.prompts))
    work = out / WORK_DIR
    check_out_dir(out, work, None)
    return prompts, splits, prompts_sha, out, work


def text_columns(prompts: PromptFile, index: int) -> dict[str, Any]:
    """The text columns (:data:`evolve.traces.schema.TEXT_COLUMNS`) of text ``index``'s records: its category
    and question id where the prompts file gives them (empty for a plain file)."""
    text = prompts.texts[index]
    return {k: v for k, v in (("category", text.category), ("question_id", text.question_id)) if v is not None}


class TurnEncoder:
    """Token ids of every text of a harvest, a later turn's with its question's earlier answers.

    A first turn is :func:`evolve.harvest.prompts.encode_prompt` of its prompt; a later turn gets the earlier
    turns and the model's answers to them (decoded with special tokens skipped, stripped) as the chat history,
    as Spec-Bench decodes multi-turn questions. ``answers`` maps a finished text to its completion ids (a
    text finished in an earlier run is read from its part file, ``parts``: text -> part path).
    """

    def __init__(self, prompts: PromptFile, tokenizer, vocab: int, parts: dict[int, Path] | None = None,
                 room: tuple[int | None, int | None] = (None, None)):
        self.prompts, self.tokenizer, self.vocab = prompts, tokenizer, vocab
        self.parts = parts or {}
        self.room = room  # (tokens a prompt may have, the target's context): evolve.harvest.prompts.check_context
        self.answers: dict[int, list[int]] = {}
        self.contexts: dict[int, str] = {}

    def answer(self, index: int) -> str:
        """The decoded answer of finished text ``index``. Raises: KeyError when it is not finished."""
        if index not in self.answers:
            from evolve.harvest.resume import read_parts

            info = next(i for _, i in read_parts(self.parts[index]) if i["seq_id"] == index)
            self.answers[index] = [int(t) for t in info["completion_ids"]]
        return self.tokenizer.decode(self.answers[index], skip_special_tokens=True).strip()

    def __call__(self, index: int) -> list[int]:
        """The prompt ids of text ``index`` (a later turn's after its earlier turns are finished)."""
        earlier = self.prompts.earlier_turns(index)
        history = [(self.prompts.texts[e].prompt, self.answer(e)) for e in earlier]
        ids = encode_prompt(self.tokenizer, self.prompts.texts[index].prompt, self.prompts.where(index), self.vocab,
                            history=history)
        check_context(ids, self.prompts.where(index), *self.room)
        if history:
            self.contexts[index] = self.tokenizer.decode(ids, skip_special_tokens=False)
        return ids


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

    A later turn of a multi-turn question is decoded after every first turn, prompted with its question's
    earlier turns and the model's answers (:class:`TurnEncoder`).

    Raises: InputError for bad options or files (see :func:`build` and :func:`prepare`), or an output
    directory holding other data or other settings.
    """
    prompts, splits, prompts_sha, out, work = prepare(config)
    check_out_dir(out, work, settings_fingerprint(config, prompts_sha), SETTINGS_KEYS)  # before the models load
    console = console or stderr_console()
    if progress and console.is_terminal:
        console.print(f"harvest: loading and hashing the models ({config.target}"
                      f"{', ' + config.draft_model if config.draft_model else ''})", soft_wrap=True)
    setup = build(config)
    settings = fingerprint(config, setup.description, prompts_sha)
    check_out_dir(out, work, settings)
    tokenizer = setup.target.tokenizer
    done = finished_texts(work)  # the parts of both kinds: a sharded harvest may be resumed in one process
    encode = TurnEncoder(prompts, tokenizer, setup.engine.vocab, done, prompt_room(config, setup.target))
    encoded = {t: encode(t) for t, text in enumerate(prompts.texts) if text.turn == 1}

    def prompt_ids(t: int) -> list[int]:
        if t not in encoded:  # a later turn: its question's earlier turns are finished by now
            encoded[t] = encode(t)
        return encoded[t]

    atomic_write_text(work / MANIFEST_FILE, json.dumps(
        {"generator": GENERATOR, "fingerprint": settings, "texts_total": len(prompts.texts)}, indent=2))
    split_of = {t: name for name, idx in splits.items() for t in idx}
    shared = setup.engine.drafter.cross_request
    order = split_order(splits) if shared else processing_order(splits)
    todo = [t for t in order if t not in done]
    done_before = len(order) - len(todo)

    def by_split(texts: list[int]) -> list[list[int]]:
        """The passes of ``texts``: later turns after every earlier one; split after split for a shared cache."""
        if not shared:
            return turn_passes(prompts, texts)
        return [p for name in SPLITS for p in turn_passes(prompts, [t for t in texts if split_of[t] == name])]

    passes = by_split(todo)
    if shared:  # a resumed harvest: the finished texts enter the drafter's cache as they did, in order
        for t in (t for p in by_split([t for t in order if t in done]) for t in p):
            encode.answer(t)
            setup.engine.drafter.warm(t, prompt_ids(t), encode.answers[t])

    t0 = time.perf_counter()
    tokens = 0
    interrupted = False
    bar = ProgressBar(console, len(order), done_before, enabled=progress)
    def on_block(n: int) -> None:
        nonlocal tokens
        tokens += n
        bar.tokens(tokens, time.perf_counter() - t0)

    forward_before = setup.engine.forward_seconds()
    try:
        with bar:
            for turn_todo in passes:  # later turns after every earlier one (one pass: plain); by split when shared
                texts = ((t, prompt_ids(t), text_rng(config.seed, t)) for t in turn_todo)
                if config.tree_nodes is None:
                    results = ((t, result, None) for t, result in setup.engine.run_texts(
                        texts, config.gamma, config.max_new_tokens, config.batch_size, on_block))
                else:
                    from evolve.harvest.tree_harvest import run_tree_texts

                    results = run_tree_texts(setup.engine, texts, config.tree_nodes, config.tree_width,
                                             config.max_new_tokens, on_block)
                for t, result, trees in results:
                    text = prompts.texts[t]
                    info = {"seq_id": t, "split": split_of[t], "line": text.line, "prompt": text.prompt,
                            "completion": tokenizer.decode(result.tokens, skip_special_tokens=False),
                            "completion_ids": result.tokens, "prompt_tokens": len(encoded[t]),
                            "tokens": len(result.tokens), "finish": result.finish,
                            "target_calls": result.target_calls, "blocks": len(result.blocks)}
                    columns = text_columns(prompts, t)
                    if shared:  # the ids a shared cache is replayed from (a resumed harvest, live decoding)
                        info["prompt_ids"] = prompt_ids(t)
                    if prompts.structured:
                        info.update(columns, turn=text.turn, **({"context": encode.contexts[t]}
                                                                if t in encode.contexts else {}))
                    if trees is not None:  # the tree table first: the records part marks the text done
                        info["trees"] = int(trees["tree"].nunique())
                        info["trees_sha256"] = write_tree_part(tree_part_path(work, t), trees.assign(**columns))
                    write_part(part_path(work, t), result.frame(t).assign(**columns), info)
                    encode.answers[t] = result.tokens
                    bar.text_done()
                    if on_text_done is not None:
                        on_text_done(t)
    except KeyboardInterrupt:
        interrupted = True
    seconds = time.perf_counter() - t0
    last_run = LastRun(seconds, tokens, setup.engine.forward_seconds() - forward_before)
    consolidated, stats, n_done = consolidate(out, config, setup.description, splits, prompts_sha, last_run,
                                              split_rule=split_rule(prompts) if prompts.structured else None)
    return HarvestResult(out, n_done, len(order), interrupted, consolidated, stats, tokens, seconds)
