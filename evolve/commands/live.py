"""``python benchmark.py live``: real speculative decoding with each rule against plain decoding, measured.

    python benchmark.py live --target M (--draft PATH | --draft-skip-layers LIST | --draft-window S,R)
        --prompts FILE (--rule NAME | --champion FILE)... [--gamma 5] [--max-new-tokens 64]
        [--tree-nodes N [--tree-width 2]] [--temperature 1] [--top-k K] [--top-p P] [--seed 0] [--format table|json] [--output FILE]

The target, the drafter and the sampling are loaded exactly as ``generate_data.py harvest``
loads them (:func:`evolve.harvest.loop.build`). For every prompt, in turn, the target first
decodes the prompt alone (plain autoregressive decoding, one pass per token), then every rule
decodes it speculatively (each row's ``text``: :meth:`evolve.live.decoding.ChainDecoder.text`), all from the same random
stream ``numpy.random.default_rng([seed, prompt index])``; interleaving the runs prompt by prompt
spreads any change of machine load over all of them. One warm-up text of at most 8 tokens per
run (not counted) loads the compiled kernels first. With ``repeats`` N (:class:`LiveExtras`) every prompt is decoded N
times by every row, the order of the rows within a prompt rotated by one position per repeat (so no row always runs
first after another); a row's tokens/s is then the median over repeats of the repeat's tokens/s (min, max and the
median absolute deviation beside it), its speedup the median of the repeats' own ratios, with a paired bootstrap
interval over texts (:mod:`evolve.eval.bootstrap`; all repeats of a text resampled together). ``peers``
(:mod:`evolve.live.peers`) add the rows of other libraries' shipped speculation, interleaved with ours on the same
prompt ids, each against its own library's plain decoding; the caption then names the fastest configuration in
absolute tokens per second and this project's plain decoding against llama-cpp-python's. Per rule (JSON keys of
:data:`KEYS`):

* tokens: tokens emitted over all prompts; target_calls: target passes after the prefills;
  tokens_per_call = tokens / target_calls (in [1, gamma + 1]);
* tokens_per_s: tokens per second of decoding wall time (the prompts' prefills and the damage measurement
  excluded); ar_tokens_per_s: the same for plain decoding of the same prompts in the same run;
  speedup = tokens_per_s / ar_tokens_per_s;
* tv_per_token: the exact expected total-variation damage per emitted token, from the whole
  vocabulary at every verified position (:mod:`evolve.live.decoding`); 0 for a lossless rule
  (up to float64 rounding, about 1e-16);
* tokens_per_call_se: the standard error of tokens_per_call (target calls taken as independent);
  expected_tokens_per_call: 1 + sum_d prod_{i<=d} tau_i(x_i) averaged over the calls, the
  evaluator's tokens per call on the live blocks (it does not sample the accept/reject draws, so
  it separates rules with fewer calls);
* engine (``evolve`` or the peer library), repeats, tokens_per_s_min / _max / _mad, speedup_min / _max, speedup_low /
  _high (the 95% paired bootstrap interval over texts) and same_text (the share of decodes equal to the same engine's
  plain decoding of the same prompt and repeat), fastest_over / _low / _high (the fastest row's tokens/s over this
  row's with its paired interval over texts, :func:`evolve.live.rows.fastest_over`, the fastest among the rows and
  this project's plain decoding; None for the fastest row), engine_fastest_over / _low / _high (the same with the
  fastest configuration of the row's own engine, :func:`evolve.live.rows.engine_fastest_over`: an engine's exported
  policy against that engine's own speculation).

A relaxation champion (a program of kind ``relaxation``, :mod:`evolve.kinds.registry`: the weight w of relaxed
block verification) decodes by block verification against (1 - w) p + w q at each drafted position
(:func:`evolve.live.decoding.live_block_verified`); its tv_per_token is the expected sum of w_d TV(p_d, q_d)
over the emitted positions per emitted token, as :mod:`evolve.eval.relaxed_block` scores it from
records, and its expected_tokens_per_call is 1 + E[n] given the drafts. ``block_verification`` is the
same with w = 0. The dispatch on the kind is the kind's ``live`` hook. With ``tree_nodes`` the row ``eagle2_full``
decodes by the tree harvest's draft trees and a tree-shape champion by the same trees pruned by its program, both
verified by SpecInfer; each call is priced as ``benchmark.py trees`` prices its tree (:mod:`evolve.live.tree_decoding`).

Prompts files are read as the harvest reads them (:mod:`evolve.harvest.prompts`: plain text, or Spec-Bench-style
JSON Lines with ``--categories``); a later turn of a multi-turn question is decoded after its question's earlier
turns, prompted with the answers the same decoder (plain decoding, or the same rule) gave them
(:class:`TurnContexts`). With categories the table is followed by one per Spec-Bench task group
(:func:`category_lines`).

With ``data_dir`` and ``split`` only the prompts a harvested dataset put in that split are decoded
(:func:`evolve.harvest.subset.split_prompts`; e.g. the held-out test prompts of the dataset a champion was evolved on),
each with its own text index's random stream, as the harvest drew it.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from evolve.eval.bootstrap import COVERAGE, check_replicates, interval_caveat
from evolve.eval.costs import check_plain_rate, load_costs
from evolve.errors import InputError, InputWarning, counted
from evolve.harvest.config import HarvestConfig
from evolve.harvest.loop import build, text_rng
from evolve.engine.drafters import chosen_drafters
from evolve.engine.ngram import lookup_lengths
from evolve.engine.suffix import suffix_settings
from evolve.harvest.subset import request_history, split_prompts
from evolve.harvest.prompts import PromptFile, encode_prompt, read_prompt_file, read_prompts
from evolve.eval.evaluator import EvalData
from evolve.traces.io import load_split
from evolve.commands.compare.table import champion_from_file
from evolve.report.live import FORMATS, OURS, LiveReport, format_json, format_table
from evolve.report.output import check_output, resolve_format, write_output
from evolve.commands.rules import rule_named
from evolve.live.turns import TurnContexts, with_earlier_turns
from evolve.export.engines.draft_models import DRAFT_MODELS
from evolve.export.engines.llama_cpp_python import runs
from evolve.live.deployed import check_engine_run, predict_engine_rows
from evolve.live.peers import BACKEND_PEERS, PeerSetup, exported_row_name, peer_rows, peers_named
from evolve.live.decoding import BlockVerifier, LiveCounts, autoregressive_text
from evolve.live.rows import Entry, engine_fastest_over, fastest, fastest_over, per, rate, spread, total
from evolve.live.tree_decoding import with_fixed_tree
from heuristics.contract import Rule

#: Tokens of the warm-up text of every run.
WARMUP_TOKENS = 8
#: Bootstrap replicates of the speedup intervals by default.
DEFAULT_REPLICATES = 1000


def torch_threads() -> int:
    """Torch's CPU threads in use (the count the peers run with, as the rows do)."""
    import torch

    return torch.get_num_threads()


def decoder(rule: Rule | BlockVerifier):
    """The row live decoding decodes ``rule`` with (the ``live`` hook of its kind: a
    :class:`evolve.live.decoding.ChainDecoder` or a :class:`evolve.live.tree_decoding.TreeDecoder`; the verifier
    ``block_verification``, and a row given as it is, are their own rows).

    Raises: InputError for a kind live decoding cannot run, or a rule reading a feature live
    decoding does not compute.
    """
    if hasattr(rule, "text"):  # already a row (the verifier block_verification, or a kind's row)
        return rule
    handler = rule.program_kind.hook("live", "python benchmark.py live", f"rule '{rule.name}'")
    return handler(rule)


def named_rules(rule_names: Sequence[str] = (), champion_files: Sequence[str | os.PathLike] = ()) -> list:
    """The rules ``rule_names`` name (:func:`evolve.commands.rules.rule_named`) then those of the champion files, in
    order; a champion whose name another of them has too (two runs' files both name theirs ``champion``) is named
    after its file, ``NAME (FILE NAME)`` (its path where file names repeat too), so every row is told apart.
    Raises: InputError for an unknown name or a bad champion file."""
    rules = [rule_named(name) for name in rule_names]
    champions = [champion_from_file(path) for path in champion_files]
    names = [r.name for r in rules + champions]
    files = [Path(p).name for p in champion_files]
    for i, (rule, path) in enumerate(zip(champions, champion_files)):
        if names.count(rule.name) > 1:
            champions[i] = replace(rule, name=f"{rule.name} ({files[i] if files.count(files[i]) == 1 else path})")
    return rules + champions


def resolve_rules(rule_names: Sequence[str] = (), champion_files: Sequence[str | os.PathLike] = (),
                  trees: bool = False) -> list:
    """What to decode with for the names ``rule_names`` (:func:`evolve.commands.rules.rule_named`: registered
    rules, family members, promoted champions, and ``block_verification``) then the champion files, in order,
    each as :func:`decoder` runs it (a relaxation champion as relaxed block verification, a tree shape as a tree
    row); with ``trees`` (draft trees, ``--tree-nodes``) the fixed tree's row comes before the first tree shape
    (:func:`evolve.live.tree_decoding.with_fixed_tree`).

    Raises: InputError for none at all (parameter ``rules``), an unknown name, a bad champion file, a
    rule that reads a feature live decoding does not compute, or a tree shape without ``trees``.
    """
    out = with_fixed_tree([decoder(rule) for rule in named_rules(rule_names, champion_files)], trees)
    if not out:
        raise InputError("give at least one rule (a rule name or a champion file) to decode with", param="rules")
    return out


def _check_lookahead(config: HarvestConfig, rules: Sequence) -> None:
    """Refuse a row reading a drafter column (prompt lookup's ``lookup_len``, ``lookup_freq``: a verification-length
    policy's ``lookahead``) the configured drafter does not give (InputError naming the drafter option)."""
    offered = {c for d in chosen_drafters(config) for c in d.lookahead_columns}
    for rule in rules:
        missing = [f for f in rule.lookahead if f not in offered]
        if missing:
            raise InputError(f"policy '{rule.name}' reads '{missing[0]}', which only the prompt-lookup drafter gives",
                             param="ngram")


@dataclass(frozen=True)
class LiveExtras:
    """What a live run adds to its rules: ``repeats`` (every prompt decoded that many times by every row, the order of
    the rows rotated by one position per repeat), ``peers`` (:class:`evolve.live.peers.Peer` objects: the libraries
    whose shipped speculation is decoded beside the rules), ``peer_k`` {peer name: K} (each peer's tuned
    prompt-lookup row at that K), ``tune_prompts`` (a prompts file: the K of each peer without one in ``peer_k`` is
    tuned there, :func:`evolve.live.peers.tune`), ``exported`` ((peer name, row name, module text) of exported
    verification-length policies, each written for that peer's loop: :data:`PEER_MODULES`), ``bootstrap`` (replicates of
    the speedup intervals, :mod:`evolve.eval.bootstrap`) and ``tree`` ((N nodes, K width) of the tree rows,
    :mod:`evolve.live.tree_decoding`; None: none); ``engine_plain``: decode the plain row of the engine the backend
    stands for (:data:`evolve.live.peers.BACKEND_PEERS`) even when that peer is not among ``peers``."""

    repeats: int = 1
    peers: tuple = ()
    peer_k: tuple[tuple[str, int], ...] = ()
    tune_prompts: str | os.PathLike | None = None
    exported: tuple[tuple[str, str, str], ...] = ()
    bootstrap: int = DEFAULT_REPLICATES
    tree: tuple[int, int] | None = None
    history: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()
    engine_plain: bool = False


class _Decoder(NamedTuple):
    """A row before it joins the interleaved loop: its name, engine, ``decode(prompt ids, text index) -> (ids,
    LiveCounts)``, whether it is plain decoding and its ``fresh()`` (:attr:`evolve.live.rows.Entry.fresh`)."""

    name: str
    engine: str
    decode: Callable[[Sequence[int], int], tuple[list[int], LiveCounts]]
    plain: bool = False
    fresh: Callable[[], None] | None = None


def _peer_decoders(config: HarvestConfig, extras: LiveExtras, setup, longest: int, prompts_ids) -> list[_Decoder]:
    """The peers' rows (:mod:`evolve.live.peers`), their tuned rows included, as :class:`_Decoder` rows (the engine's
    own plain decoding first when ``extras.engine_plain`` asks for it); ``longest``: a bound of the prompt ids of any
    text decoded."""
    baseline = BACKEND_PEERS.get(config.backend) if extras.engine_plain else None
    if baseline in {p.name for p in extras.peers}:
        baseline = None
    if not extras.peers and baseline is None:
        return []
    peer_setup = PeerSetup(str(config.target), torch_threads(), tuple(sorted(setup.engine.eos)),
                           longest + config.max_new_tokens + config.gamma + 16, extras.exported,
                           lookup_lengths(config.ngram), config.gamma, config.device, _suffix(config), extras.history,
                           setup.target.model)
    rows = peer_rows(extras.peers, peer_setup, baseline, dict(extras.peer_k), prompts_ids, config.max_new_tokens)
    return [_Decoder(r.name, r.engine, (lambda ids, i, r=r: r.decode(ids, config.max_new_tokens)), r.plain, r.fresh)
            for r in rows]


def _suffix(config: HarvestConfig) -> tuple[int, int] | None:
    """(tree depth, cached responses) of a suffix-decoding run (:func:`evolve.engine.suffix.suffix_settings`), else
    None."""
    return suffix_settings(config.suffix) if config.suffix is not None else None


def _tune_ids(extras: LiveExtras, tokenizer, vocab: int) -> list[list[int]]:
    """The token ids of ``extras.tune_prompts`` (none without a file or without peers)."""
    if extras.tune_prompts is None or not extras.peers:
        return []
    prompts, lines = read_prompts(extras.tune_prompts, "tune_prompts")
    return [encode_prompt(tokenizer, p, f"{extras.tune_prompts}, line {n}", vocab, param="tune_prompts")
            for p, n in zip(prompts, lines)]


def run_live(config: HarvestConfig, rules: Sequence, on_text: Callable[[int, int], None] | None = None,
             texts: Sequence[int] | None = None, extras: LiveExtras | None = None) -> LiveReport:
    """Decode the prompts of ``config.prompts`` plainly and with every rule (module doc); returns the report.

    ``config`` gives the models, drafter, gamma, max_new_tokens, sampling, seed, dtype, device and
    threads (its ``out`` is not used). ``texts``: the prompt indices to decode (default all; see
    :func:`evolve.harvest.subset.split_prompts`); prompt i decodes from ``numpy.random.default_rng([seed, i])``. ``extras``
    (:class:`LiveExtras`): repeats and the peers' rows, interleaved with the rules.
    ``on_text(done, total)`` is called after each prompt of each repeat.
    Raises: InputError as :func:`evolve.harvest.loop.build`, for a bad prompts file or a text index
    beyond its prompts.
    """
    extras = extras or LiveExtras()
    prompts = read_prompt_file(config.prompts).select(config.categories)
    n = len(prompts.texts)
    texts = list(range(n)) if texts is None else list(texts)
    bad = next((i for i in texts if not 0 <= i < n), None)
    if bad is not None or not texts:
        raise InputError(f"{config.prompts} has {n} prompts; no prompt "
                         f"{'to decode' if bad is None else f'with index {bad}'}", param="prompts")
    texts = with_earlier_turns(prompts, texts)
    rules = [decoder(rule) for rule in rules]
    _check_lookahead(config, rules)
    setup = build(config)
    engine = setup.engine
    encode = TurnContexts(prompts, setup.target.tokenizer, engine.vocab)
    new = config.max_new_tokens
    with_fixed_tree(rules, extras.tree is not None, fixed=False)

    def run(rule, ids, i, tokens):
        return rule.text(engine, ids, tokens, text_rng(config.seed, i), gamma=config.gamma, tree=extras.tree)

    decoders = [_Decoder("plain", OURS, lambda ids, i: autoregressive_text(engine, ids, new, text_rng(config.seed, i)),
                         True)]
    decoders += [_Decoder(rule.name, OURS, lambda ids, i, rule=rule: run(rule, ids, i, new)) for rule in rules]
    decoders += _peer_decoders(config, extras, setup, _longest(prompts, encode, texts, new),
                               _tune_ids(extras, setup.target.tokenizer, engine.vocab))
    entries = [Entry(d.name, d.engine, encode.runner(key - 1, d.decode), d.plain, d.fresh)
               for key, d in enumerate(decoders)]
    warm = min(WARMUP_TOKENS, new)
    first = texts[0]
    shared, caches, started = engine.drafter, {}, set()

    def drafter_of(key) -> None:
        """A drafter sharing a cache across texts: each row and repeat its own, filled with the earlier splits'
        texts first (``extras.history``), so no row sees another's responses nor a repeat the last one's (a peer's
        row keeping such a cache, an exported suffix policy, starts its own again:
        :attr:`evolve.live.rows.Entry.fresh`)."""
        if isinstance(key, tuple) and entries[key[0]].fresh is not None and key not in started:
            started.add(key)
            entries[key[0]].fresh()
        if shared.cross_request:
            if key not in caches:
                caches[key] = shared.fresh()
                for prompt_ids, response_ids in extras.history:
                    caches[key].warm(None, prompt_ids, response_ids)
            engine.drafter = caches[key]

    drafter_of("warm-up")
    autoregressive_text(engine, encode(first, None), warm, text_rng(config.seed, first))
    for rule in rules:
        run(rule, encode(first, None), first, warm)
    for entry in entries[1 + len(rules):]:
        entry.run(first)
    order = list(range(len(entries)))
    for r in range(extras.repeats):
        shift = r % len(order)
        for done, i in enumerate(texts, 1):
            for e in order[shift:] + order[:shift]:
                drafter_of((e, r))
                entries[e].results[r, i] = entries[e].run(i)
            if on_text is not None:
                on_text(r * len(texts) + done, extras.repeats * len(texts))
    ours = entries[:1 + len(rules)]
    ar = total(entries[0])
    per_rule = [total(e) for e in ours[1:]]
    per_category = [per(e, lambda rt: prompts.texts[rt[1]].category) for e in ours]
    by_category = {c: [p[c] for p in per_category] for c in per_category[0] if c is not None}
    reference = {e.engine: e for e in entries if e.plain}
    groups = np.array([prompts.texts[i].question for i in texts], dtype=np.int64)
    rows = []
    for entry, rule in zip(ours[1:], rules):
        c = total(entry)
        rows.append({"rule": rule.name, "engine": OURS, "tokens": c.tokens, "target_calls": c.target_calls,
                     "tokens_per_call": c.tokens_per_call, "tv_per_token": c.tv_per_token,
                     "tokens_per_call_se": c.tokens_per_call_se, "expected_tokens_per_call": c.expected_tokens_per_call,
                     "mean_drafted": c.mean_drafted, "predicted_tokens_per_s": None, "predicted_speedup": None,
                     "predicted_context_tokens": None, **spread(entry, entries[0], texts, groups, extras.bootstrap)})
    for entry in entries[1 + len(rules):]:
        c = total(entry)
        nan = float("nan")
        rows.append({"rule": entry.name, "engine": entry.engine, "tokens": c.tokens, "target_calls": c.target_calls,
                     "tokens_per_call": c.tokens_per_call, "tv_per_token": 0.0, "tokens_per_call_se": nan,
                     "expected_tokens_per_call": nan, "mean_drafted": nan, "predicted_tokens_per_s": None,
                     "predicted_speedup": None, "predicted_context_tokens": None,
                     **spread(entry, reference[entry.engine], texts, groups,
                                                                           extras.bootstrap)})
    fastest_over(rows, entries, texts, groups, extras.bootstrap)
    engine_fastest_over(rows, entries, texts, groups, extras.bootstrap)
    drafter = setup.description["drafter"]
    drafter_text = ", ".join(f"{k} {v}" for k, v in drafter.items() if k != "sha256")
    caption = (f"live decoding: target {Path(config.target).name} ({setup.target.architecture}), "
               f"drafter {drafter_text}; "
               f"gamma {config.gamma}, temperature {config.temperature:g}, top-k {config.top_k}, top-p "
               f"{config.top_p:g}; {counted(len(texts), 'prompt')}, at most {config.max_new_tokens} new tokens each, seed "
               f"{config.seed}; plain decoding: {ar.tokens} tokens, {ar.tokens_per_s:.2f} tokens/s")
    if extras.tree is not None:
        caption += f"; draft trees of {extras.tree[0]} nodes, width {extras.tree[1]}, verified by SpecInfer"
    if extras.repeats > 1 or len(reference) > 1:
        caption += _extended_caption(config, extras, entries, groups)
    return LiveReport(rows, ar, caption, per_rule, dict(sorted(by_category.items())),
                      peer_counts=[total(e) for e in entries[1 + len(rules):]])


def _longest(prompts: PromptFile, encode: "TurnContexts", texts: Sequence[int], new: int) -> int:
    """An upper bound of the prompt ids of any text decoded, for a peer's context: its prompt's ids and, for a later
    turn, its question's earlier prompts each with an answer of at most ``new`` tokens (64 ids a turn for a chat
    template's markup)."""
    def ids(t: int) -> int:
        return len(encode.tokenizer.encode(prompts.texts[t].prompt)) + 64

    return max(sum(ids(e) + new for e in prompts.earlier_turns(i)) + ids(i) for i in texts)


def _extended_caption(config, extras: LiveExtras, entries: list[Entry], groups: np.ndarray) -> str:
    """The caption's sentences on repeats, timing, the fastest configuration (:func:`evolve.live.rows.fastest`, as
    the Fastest/row column's) and the backend's overhead."""
    plain_rows = {e.engine: rate(e) for e in entries if e.plain}
    best = entries[fastest(entries)]
    text = (f"; {counted(extras.repeats, 'repeat')} (every prompt decoded once per repeat by every row, the row order rotated by "
            f"one per repeat), tokens/s the median over repeats [min-max], speedup over the same engine's plain "
            f"decoding with its {COVERAGE:.0%} paired bootstrap interval over texts ({extras.bootstrap} replicates)")
    caveat = interval_caveat(groups, "questions")
    if caveat:
        text += f" ({caveat})"
    text += (f". Fastest configuration on this machine: {f'{OURS} {best.name}' if best.engine == OURS else best.name} "
             f"at {rate(best):.2f} tokens/s")
    for engine in (e for e in plain_rows if e != OURS):  # every peer's own plain decoding: ours is never alone
        ratio = plain_rows[OURS] / plain_rows[engine]
        text += (f". This project's plain decoding ({config.backend} backend) runs at {ratio:.3f}x {engine}'s "
                 f"plain decoding ({plain_rows[OURS]:.2f} against {plain_rows[engine]:.2f} tokens/s)")
    return text + ". Peers' timing starts after their first decoding step (evolve.live.peers)"


@dataclass(frozen=True)
class LiveOptions:
    """Everything :func:`live_command` does, as the command line's options of the same names.

    ``config``: the models, drafter, prompts file and sampling (its ``out`` is not used); ``rules``:
    rule names and ``champions``: champion files to decode with (at least one in all); ``data_dir``
    and ``split``: decode only the prompts a harvested dataset put in that split (None: every prompt);
    ``fmt`` (``--format``) and ``output``: the rendering and the file to write (None: the text is
    returned only); ``costs``: a cost file (:mod:`evolve.eval.costs`): each row gains the prediction of
    the cost model for the same run, ``predicted_tokens_per_s`` = the tokens emitted / the sum over the
    run's target calls of target_forward_s(k + 1) + k * draft_token_s (k the call's drafted tokens:
    :meth:`evolve.live.decoding.LiveCounts.predicted_seconds`) and ``predicted_speedup`` = that times
    ``plain_token_s``, beside the measured ones, every call priced at the run's mean context
    (:meth:`evolve.eval.costs.Costs.at_context` of plain decoding's
    :attr:`evolve.live.decoding.LiveCounts.mean_context`, for a file timed at two contexts;
    ``predicted_context_tokens``). ``repeats``, ``peers`` (names of :data:`evolve.live.peers.PEERS`),
    ``peer_k`` ((peer name, K) pairs), ``tune_prompts``, ``bootstrap`` and ``exported`` ((peer name, row name, module
    text) of exported policies, written by the command): :class:`LiveExtras`. ``tree_nodes`` (None: no tree rows) and
    ``tree_width``: the draft trees of the tree rows (:mod:`evolve.live.tree_decoding`), validated as the tree harvest's
    (:meth:`evolve.harvest.config.HarvestConfig.check_tree`) but greedy decoding allowed. ``engine_plain``: decode
    the plain row of the engine the backend stands for beside ours (:class:`LiveExtras`).
    """

    config: HarvestConfig
    rules: tuple[str, ...] = ()
    champions: tuple[str | os.PathLike, ...] = ()
    data_dir: str | os.PathLike | None = None
    split: str = "test"
    fmt: str | None = None
    output: str | os.PathLike | None = None
    costs: str | os.PathLike | None = None
    repeats: int = 1
    peers: tuple[str, ...] = ()
    peer_k: tuple[tuple[str, int], ...] = ()
    tune_prompts: str | os.PathLike | None = None
    bootstrap: int = DEFAULT_REPLICATES
    exported: tuple[tuple[str, str, str], ...] = ()
    tree_nodes: int | None = None
    tree_width: int = 2
    engine_plain: bool = True

    @classmethod
    def from_options(cls, options: dict[str, Any], drafters: dict[str, Any]) -> "LiveOptions":
        """The options of the command line by name: :class:`HarvestConfig`'s fields (and ``drafters``, drafter field
        -> value) go into ``config``, the others are this class's fields."""
        names = {f.name for f in fields(HarvestConfig)} - {"tree_nodes", "tree_width"}
        config = HarvestConfig(**{k: v for k, v in options.items() if k in names}, **drafters)
        return cls(config=config, **{k: v for k, v in options.items() if k not in names})


#: The peers that run an exported policy inside their own loop: peer name (a draft-model target's engine) -> the writer
#: of its module (``module_source(rule, provenance, ngram, gamma, suffix=...)``).
PEER_MODULES = {m.COST_ENGINE: m.module_source for m in DRAFT_MODELS.values()}


def exported_policies(options: LiveOptions, peers: Sequence[str]) -> tuple[tuple[str, str, str], ...]:
    """(peer name, row name, module text) of every rule among the options' rules and champions that the engines run
    inside their loops (a verification-length policy: :func:`evolve.export.engines.llama_cpp_python.runs`), exported
    for each of ``peers`` that has a writer (:data:`PEER_MODULES`) with the run's drafter (prompt lookup, or suffix
    decoding with its depth and cache) and gamma.

    A policy the export refuses for a peer (a column its drafter cannot give there), or any policy of a run drafting
    by neither drafter (a draft model), gets no row in that peer, with a one-line InputWarning saying why."""
    writers = [(p, PEER_MODULES[p]) for p in peers if p in PEER_MODULES]
    if not writers:
        return ()
    wheres = [f"rule {n}" for n in options.rules] + [str(p) for p in options.champions]
    policies = [(r, where) for r, where in zip(named_rules(options.rules, options.champions), wheres) if runs(r)]
    config = options.config
    suffix = _suffix(config)
    if policies and not config.ngram and suffix is None:  # the engines' own rows still decode beside the rules
        for peer, _ in writers:
            for r, _ in policies:
                warnings.warn(InputWarning(f"no row '{exported_row_name(peer, r.name)}': its module drafts by prompt "
                                           f"lookup or suffix decoding, and this run drafts by neither"), stacklevel=2)
        return ()
    out = []
    for peer, write in writers:
        for r, where in policies:
            try:
                out.append((peer, r.name, write(r, where, lookup_lengths(config.ngram), config.gamma, suffix=suffix)))
            except InputError as e:  # a column its drafter cannot give there: the policy decodes on the backend only
                warnings.warn(InputWarning(f"no row '{exported_row_name(peer, r.name)}': {e}"), stacklevel=2)
    return tuple(out)


def live_command(options: LiveOptions, on_text: Callable[[int, int], None] | None = None) -> tuple[LiveReport, str]:
    """Check the options, run :func:`run_live` (on the ``split`` prompts of ``data_dir`` when given,
    :func:`evolve.harvest.subset.split_prompts`), render the report and write it to ``output`` when given. ``on_text(done, total)``
    is called after each prompt.

    Returns (report, text). Raises InputError for bad options, files or rules.
    """
    o, config = options, options.config
    fmt = resolve_format(o.fmt, o.output, FORMATS)
    check_output(o.output, None, inputs=(config.prompts, config.target, config.draft_model, *o.champions, o.costs,
                                        o.data_dir, o.tune_prompts))
    config.check()
    if isinstance(o.repeats, bool) or not isinstance(o.repeats, int) or o.repeats < 1:
        raise InputError(f"expected a whole number of repeats >= 1 (value {o.repeats!r})", param="repeats")
    check_replicates(o.bootstrap)
    peers = tuple(peers_named(o.peers))
    if peers and config.temperature != 0:
        raise InputError(f"the peers decode greedily: use temperature 0 (value {config.temperature:g})",
                         param="temperature")
    unknown = next((name for name, _ in o.peer_k if name not in o.peers), None)
    if unknown is not None:
        raise InputError(f"names peer '{unknown}', which is not among the peers decoded ({', '.join(o.peers) or 'none'})",
                         param="peer_k")
    tree = None if o.tree_nodes is None else (o.tree_nodes, o.tree_width)
    replace(config, tree_nodes=o.tree_nodes, tree_width=o.tree_width).check_tree(greedy=True)
    rules = resolve_rules(o.rules, o.champions, tree is not None)
    texts = None if o.data_dir is None else split_prompts(config.prompts, o.data_dir, o.split, config.categories)
    costs = load_costs(o.costs) if o.costs is not None else None
    engine = None if costs is None else check_engine_run(o.costs, costs, o.peers, config.backend)
    exported = tuple(o.exported) or exported_policies(o, [p.name for p in peers])
    shared = any(d.cross_request for d in chosen_drafters(config))
    history = request_history(o.data_dir, o.split) if shared and o.data_dir is not None else ()
    extras = LiveExtras(o.repeats, peers, tuple(o.peer_k), o.tune_prompts, exported, o.bootstrap, tree, history,
                        o.engine_plain)
    report = run_live(config, rules, on_text, texts, extras)
    costs = None if costs is None else costs.at_context(report.autoregressive.mean_context)
    for row, counts in zip(report.rows, report.counts):
        predicted = None if costs is None else counts.tokens / counts.predicted_seconds(costs)
        row["predicted_tokens_per_s"] = predicted
        row["predicted_speedup"] = None if predicted is None else predicted * costs.plain_token_s
    if engine is not None:  # the file predicts the engine's rows (evolve.live.deployed)
        check_plain_rate(o.costs, costs, predict_engine_rows(report, costs, engine),
                         f"{engine}'s own plain decoding, {counted(torch_threads(), 'thread')}")
    elif costs is not None and report.rows:
        check_plain_rate(o.costs, costs, report.rows[0].get("ar_tokens_per_s"),
                         f"backend {config.backend}, {config.threads or 'default'} threads")
    for row in report.rows:  # the context the predictions are priced at, on the rows predicted
        row["predicted_context_tokens"] = None if row["predicted_tokens_per_s"] is None else costs.priced_context
    if costs is not None and o.data_dir is not None and tree is None:
        report.headroom = _live_headroom(o, report, costs)
    text = format_json(report) if fmt == "json" else format_table(report)
    if o.output is not None:
        write_output(text, o.output)
    return report, text


def _live_headroom(o: LiveOptions, report: LiveReport, costs) -> list[dict]:
    """The champions' live headroom shares (the ``live_headroom`` of their kinds' ``compare`` hooks) against the bound
    of the records of ``o.split`` of ``o.data_dir``."""
    originals = named_rules(o.rules, o.champions)
    out: list[dict] = []
    data = None
    for kind in dict.fromkeys(r.program_kind for r in originals[len(o.rules):] if hasattr(r, "program_kind")):
        hook = getattr(kind.hooks().compare, "live_headroom", None)
        if hook is None:
            continue
        if data is None:
            data = EvalData.from_traces(load_split(o.data_dir, o.split))
        out += hook(originals, report.rows[:len(originals)], report.counts[:len(originals)], len(o.champions), data,
                    o.config.gamma, costs)
    return out


__all__ = ["DEFAULT_REPLICATES", "LiveExtras", "LiveOptions", "PEER_MODULES", "decoder", "exported_policies",
           "live_command", "named_rules", "resolve_rules", "run_live", "torch_threads"]
