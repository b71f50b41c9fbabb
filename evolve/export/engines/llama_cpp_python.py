"""The llama-cpp-python target: a verification-length policy as a ``LlamaDraftModel`` for ``Llama(draft_model=...)``.

llama-cpp-python (abetlen/llama-cpp-python) runs speculative decoding in ``Llama.generate``
(``llama_cpp/llama.py``): after each sampled token it calls ``draft_model(input_ids)`` with the text so far
(prompt and generated tokens, int ``numpy.intc`` (L,)), evaluates the returned draft tokens in one pass and
keeps them while the token it samples at each position equals the drafted one (under greedy decoding the
output is plain greedy decoding's, token for token). Any subclass of ``llama_cpp.llama_speculative.LlamaDraftModel``
(an abstract ``__call__(input_ids, /, **kwargs) -> numpy.intc array``) may draft; the library ships
``LlamaPromptLookupDecoding(max_ngram_size=2, num_pred_tokens=10)``.

:func:`module_source` writes a standalone module (importing only ``math``, numpy and llama_cpp) whose class
``PolicyPromptLookup`` drafts by this project's n-gram prompt lookup (:mod:`evolve.engine.ngram`: the latest
earlier match of the longest n-gram in [MIN, MAX], cut after an end-of-sequence token; its functions
``_occurrences``, ``lookup_match`` and ``lookup_columns`` are written into the module from their source) and
stops drafting where the policy says so, with the decisions ``benchmark.py live`` makes
(the decision live decoding makes, ``policy_keep``): before drafting token m (m = 0, 1, ..., up to ``num_pred_tokens``)
it drafts it iff ``keep_drafting`` (the numpy export of the policy, :mod:`evolve.export.numpy_module`) is 1
on the columns of that decision: draft_index = m; position = the generated tokens before the block + m; lookup_len
and lookup_freq of token m (:func:`evolve.engine.ngram.lookup_columns`); the text's history features
(:data:`evolve.gp.primitives.HISTORY_FEATURES`; the module's ``History``, the scorer's update written from its source),
advanced at each call by the previous call's outcome, which the module reads from the text it is given: the previous
call's text, then the accepted drafts, then the token sampled after them (a text that grew otherwise starts its
history again). A policy reading any other column is refused
in one line (:func:`check_policy`): the target's are not known before drafting, and the drafter's probabilities
(draft_prob, draft_top_prob, draft_cumprob, draft_entropy) are constant for a one-hot lookup drafter, so a policy
reading them would silently run as another policy.

A policy evolved on a suffix-decoding harvest (``--draft-suffix``) is written with the class
``PolicySuffixDecoding`` instead (:mod:`evolve.export.engines.llama_cpp_python_suffix`): the same decisions on the
suffix columns, its drafts from arctic-inference's suffix trees as the harvest drafted them. Both classes share
``_PolicyDraft`` (the text's prompt length, history and the policy's loop).

The generated module needs the prompt length for ``position``: ``start(prompt_len)`` sets it; without it,
a call whose text does not extend the previous call's text starts a new text whose prompt is all but its
last token (llama-cpp-python's first call after a prompt holds the prompt and the first sampled token).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from evolve.engine.drafter_base import EngineFamily
from evolve.errors import InputError
from evolve.engine.ngram import DEFAULT_LOOKUP, _occurrences, lookup_columns, lookup_match
from evolve.export.codegen import core_source, shown, straight_line
from evolve.export.engines import llama_cpp_python_suffix as suffix_part
from evolve.export.engines.base import Capabilities, Engine, Provenance, Setting
from evolve.export.engines.deploy import harvest_drafter
from evolve.export.exporter import layout, resolve_rule
from evolve.export.numpy_module import numpy_source
from evolve.gp.primitives import HISTORY_FEATURES
from heuristics.champions import read_champion
from heuristics.contract import Rule

#: The columns every drafter's class gives a decision inside llama-cpp-python, and their value (text of a Python
#: expression of ``m`` the draft index, ``start`` the block's first position, ``cols`` the drafter's columns of the
#: full draft, ``hist`` the text's history state, in :data:`HISTORY_FEATURES` order).
COMMON_VALUES: dict[str, str] = {
    "draft_index": "float(m)", "position": "float(start + m)",
    **{name: f"float(hist[{i}])" for i, name in enumerate(HISTORY_FEATURES)},
}
#: The columns the prompt-lookup drafter gives a decision (its lookup columns beside :data:`COMMON_VALUES`).
COLUMN_VALUES: dict[str, str] = {
    **COMMON_VALUES,
    "lookup_len": "float(cols['lookup_len'][m])", "lookup_freq": "float(cols['lookup_freq'][m])",
}
#: The columns the suffix-decoding drafter gives (:mod:`evolve.export.engines.llama_cpp_python_suffix`).
SUFFIX_VALUES: dict[str, str] = {**COMMON_VALUES, **suffix_part.COLUMN_VALUES}
#: Drafter family -> (its name in words, the columns its class gives a decision): the drafters the module runs.
DRAFTERS: dict[EngineFamily, tuple[str, dict[str, str]]] = {
    EngineFamily.LOOKUP: ("prompt-lookup", COLUMN_VALUES), EngineFamily.SUFFIX: ("suffix-decoding", SUFFIX_VALUES)}
#: The export target's name (``python -m evolve export --to llama-cpp-python``), and the engine whose loop's cost
#: files price its module.
NAME = COST_ENGINE = "llama-cpp-python"
#: The llama-cpp-python version the module was checked against (its ``LlamaDraftModel`` and ``Llama.generate``).
VERSION = "0.3.36"
#: Longest draft the module's class takes as its default (``num_pred_tokens``).
MAX_GAMMA = 4096


def _render(setting: Setting, provenance: Provenance, schedule=None, notes: tuple[str, ...] = (),
            host: "Host | None" = None) -> str:
    """The module text of the policy ``setting.rule`` (:func:`module_source`; checked by :func:`check_policy`), its
    drafter the champion's harvest's (prompt lookup or suffix decoding) and its defaults the drafter's settings and
    draft length of the champion's run where the champion file ``provenance.source`` records them
    (:func:`_harvest_settings`), else prompt lookup 3..1 and 8 drafts; a schedule is not read (the module runs one
    request at a time). Raises: InputError as :func:`check_policy` and :func:`_harvest_settings`. ``notes`` and
    ``host`` (None: :data:`LLAMA`): as :func:`module_source`."""
    host = LLAMA if host is None else host
    source = provenance.source
    ngram, suffix, gamma = _harvest_settings(source, host) if Path(source).is_file() else (DEFAULT_LOOKUP, None, 8)
    return module_source(setting.rule, source, ngram, gamma, notes, suffix, host)


#: What llama-cpp-python runs: a per-draft-step decision inside its own speculative loop, given the columns of its
#: drafter (:data:`DRAFTERS`; a kind asked by :meth:`evolve.export.engines.base.Engine.support` says whether its programs
#: are such decisions).
ENGINE = Engine(NAME, "llama-cpp-python", "a LlamaDraftModel module (Python)", (),
                Capabilities(step_policy=True, step_columns={family: tuple(values)
                                                             for family, (_, values) in DRAFTERS.items()}),
                _render, VERSION,
                "LlamaDraftModel and Llama.generate of the released package (a module run in its loop)")


@dataclass(frozen=True)
class Host:
    """The engine a policy's draft-model module runs in (:func:`module_source`): ``target`` its export target (whose
    kind support refuses what its loop cannot run); ``engine`` its name in words; ``library`` the package the module
    imports of it (the docstring's list); ``imports`` the module's import lines of it; ``base`` the base class of the
    drafters' classes; ``usage(cls)`` the docstring's usage lines for the drafter class ``cls``; ``calls`` the
    docstring's sentences on how the engine calls the drafter and verifies its drafts; ``nearest_model`` the export
    that runs a champion of a draft model's harvest instead (a refusal's nearest setting); ``tail`` source the module
    ends with (an adapter to the engine's API), with ``DRAFTER_CLASS`` standing for the class written."""

    target: Engine
    engine: str
    library: str
    imports: tuple[str, ...]
    base: str
    usage: object
    calls: str
    nearest_model: str
    tail: str = ""


#: llama-cpp-python: the drafter is a ``LlamaDraftModel`` that ``Llama.generate`` calls after each sampled token.
LLAMA = Host(
    ENGINE, NAME, "llama_cpp", ("from llama_cpp.llama_speculative import LlamaDraftModel",), "LlamaDraftModel",
    lambda cls: (f"    from llama_cpp import Llama\n"
                 f"    llm = Llama(model_path, draft_model={cls}(eos_token_ids=(EOS,)))"),
    "Call start(prompt_len) before a text, or the first call after a new prompt takes all but the last token as the "
    "prompt. llama-cpp-python verifies the drafts by its own sampling: with temperature 0 the text is plain greedy "
    "decoding's.", "the same champion exported for llama.cpp, which drafts with a draft model")


def runs(rule: Rule) -> bool:
    """Whether llama-cpp-python runs programs of ``rule``'s kind (a per-draft-step decision, by the kind's hook)."""
    return ENGINE.support(rule.program_kind) is not None


#: What the draft models share (:func:`module_source`): the text's prompt length and history, and the policy's decision
#: before each draft step; a drafter's class adds ``_propose(ctx)`` (its draft, at most ``num_pred_tokens`` tokens),
#: ``_columns(ctx, draft)`` (its columns of that draft) and ``_begin(ctx)`` (a new text starts).
_BASE = '''

class _PolicyDraft(BASE_CLASS):
    """The policy's decisions inside ENGINE_NAME's loop, shared by the drafters' classes (the module doc)."""

    def _setup(self, num_pred_tokens, eos_token_ids):
        self.num_pred_tokens = int(num_pred_tokens)
        self.eos = {int(t) for t in eos_token_ids}
        self._prompt_len = None
        self._last = None
        self._draft = np.zeros(0, dtype=np.intc)
        self._history = History()

    def start(self, prompt_len):
        """Say that the next call starts a text whose prompt has ``prompt_len`` tokens."""
        self._prompt_len, self._last, self._history = int(prompt_len), None, History()

    def _begin(self, ctx):
        """A new text starts with the call whose text is ``ctx`` (its prompt: the first ``_prompt_len`` tokens)."""

    def _start(self, ctx):
        """The block's first position, after reading the previous call's outcome into the text's history."""
        last, draft = self._last, self._draft
        extends = last is not None and ctx.size > last.size and np.array_equal(ctx[:last.size], last)
        if not extends:  # a new text: its prompt as start() said, else all but the last token
            if self._prompt_len is None or last is not None:
                self._prompt_len = ctx.size - 1
            self._history = History()
            self._begin(ctx)
        else:  # the text grew by the drafts the target kept, then the token it sampled after them
            accepted = ctx.size - last.size - 1
            if accepted <= draft.size and np.array_equal(ctx[last.size:last.size + accepted], draft[:accepted]):
                self._history.update(draft.size, accepted)
            else:  # grown by more than one call can add: a text of its own from here (its history starts again)
                self._history = History()
        self._last = ctx
        return ctx.size - self._prompt_len

    def __call__(self, input_ids, /, max_tokens=None, **kwargs):
        """The draft after the text ``input_ids``: at most num_pred_tokens tokens, and at most ``max_tokens`` (the
        room the engine's loop leaves before its length limit; None: no other bound), cut where the policy stops."""
        ctx = np.array(input_ids, dtype=np.int64)
        start = self._start(ctx)
        draft = self._propose(ctx)
        if max_tokens is not None:
            draft = draft[:max(int(max_tokens), 0)]
        for j, t in enumerate(draft):
            if t in self.eos:
                draft = draft[:j + 1]
                break
        cols = self._columns(ctx, draft) if draft and NEEDS_COLUMNS else {}
        hist, m = self._history.state, 0
        while m < len(draft) and keep_drafting(**{name: value(m, start, cols, hist)
                                                  for name, value in _VALUES.items()}) > 0:
            m += 1
        self._draft = np.asarray(draft[:m], dtype=np.intc)
        return self._draft.copy()
'''

_LOOKUP_CLASS = '''

class PolicyPromptLookup(_PolicyDraft):
    """Prompt lookup drafting as far as the policy RULE keeps drafting (the module doc).

    Args: ``max_ngram_size``, ``min_ngram_size``: the n-gram lengths tried, longest first (MAX_NGRAM, MIN_NGRAM
    as the policy's harvest drafted); ``num_pred_tokens``: the longest draft (GAMMA as the policy was scored);
    ``eos_token_ids``: end-of-sequence ids (a draft stops after one), e.g. ``(llm.token_eos(),)``.
    """

    def __init__(self, max_ngram_size=MAX_NGRAM, min_ngram_size=MIN_NGRAM, num_pred_tokens=GAMMA, eos_token_ids=()):
        if not 1 <= min_ngram_size <= max_ngram_size or num_pred_tokens < 1:
            raise ValueError("expected max_ngram_size >= min_ngram_size >= 1 and num_pred_tokens >= 1")
        self.max_ngram_size, self.min_ngram_size = int(max_ngram_size), int(min_ngram_size)
        self._setup(num_pred_tokens, eos_token_ids)
        self._n = 0

    def _propose(self, ctx):
        draft, self._n = lookup_match(ctx, self.num_pred_tokens, self.max_ngram_size, self.min_ngram_size)
        return draft

    def _columns(self, ctx, draft):
        return lookup_columns(ctx, draft, self._n)
'''


def check_policy(rule: Rule, family: EngineFamily = EngineFamily.LOOKUP, host: Host = LLAMA) -> None:
    """Refuse, in one line (InputError), a rule the drafter ``family`` (prompt lookup or suffix decoding,
    :data:`DRAFTERS`) inside ``host``'s loop (llama-cpp-python, or another :class:`Host` of the module) cannot run: not
    a per-step drafting decision (the kind's engines hook says which kinds are), one reading a column not in that
    drafter's columns (the target's, or the drafter's probabilities, constant for a one-hot drafter), or one whose
    drafts are verified by a lossy rule (llama-cpp-python verifies by comparing its own samples with the drafts)."""
    engine = host.engine
    if rule.nodes is None or host.target.support(rule.program_kind) is None:
        raise InputError(f"rule '{rule.name}': {engine} cannot run a {rule.kind} program: it takes a policy "
                         f"deciding before each draft step whether to draft (a verification-length policy) as a draft "
                         f"model and verifies by its own sampling; nearest setting: its own verification (the "
                         f"standard rule under greedy decoding) with a fixed draft length (export fixed_gamma:gamma=G)")
    name, columns = DRAFTERS[family]
    for feature in straight_line(rule.nodes).features:
        if feature not in columns:
            why = (f"constant for its one-hot {name} drafter, so the policy would run as another one"
                   if feature.startswith("draft_") else "not known before drafting" if feature not in
                   _ANY_DRAFTER else "another drafter's column")
            raise InputError(f"policy '{rule.name}' reads '{feature}', which the {name} drafter inside "
                             f"{engine} cannot give ({why}; it gives {', '.join(columns)})")
    host.target.support(rule.program_kind).exact(rule, None)  # the kind refuses what it cannot run (a lossy verifier)


#: Every column some drafter's class gives.
_ANY_DRAFTER = frozenset(c for _, columns in DRAFTERS.values() for c in columns)


def module_source(rule: Rule, provenance: str, ngram: tuple[int, int] = DEFAULT_LOOKUP, gamma: int = 8,
                  notes: tuple[str, ...] = (), suffix: tuple[int, int] | None = None, host: Host = LLAMA) -> str:
    """The text of a standalone module defining ``PolicyPromptLookup(LlamaDraftModel)`` for ``rule`` (module doc), or,
    with ``suffix``, ``PolicySuffixDecoding`` (:mod:`evolve.export.engines.llama_cpp_python_suffix`); with another
    ``host``, the same classes on that host's base class, followed by its adapter (transformers:
    :mod:`evolve.export.engines.transformers_generate`).

    Args: ``rule`` a verification-length policy (an expression rule; :func:`check_policy`), ``provenance`` where it
    came from (written as a string literal, e.g. the champion file), ``ngram`` (MAX, MIN) the default n-gram lengths
    and ``gamma`` the default longest draft of the class (its harvest's ``--draft-ngram`` and ``--gamma``); ``notes``
    paragraphs added to the module's docstring (how the export priced it: :mod:`evolve.export.engines.priced`);
    ``suffix`` (tree depth, cached responses) of a suffix-decoding harvest (``--draft-suffix``): the module drafts by
    suffix decoding (arctic-inference) instead of prompt lookup. Returns the module text (str). Raises: InputError as
    :func:`check_policy`.
    """
    family = EngineFamily.LOOKUP if suffix is None else EngineFamily.SUFFIX
    check_policy(rule, family, host)
    policy = numpy_source(rule.name, rule.nodes, layout(rule), provenance)
    body_start = policy.index('"""', 3) + 3  # after the numpy module's docstring (the keep_drafting semantics)
    features = straight_line(rule.nodes).features
    columns = DRAFTERS[family][1]
    values = ", ".join(f"{f!r}: lambda m, start, cols, hist: {columns[f]}" for f in features)
    if suffix is None:
        cls, imports, drafting = "PolicyPromptLookup", "", (
            "PolicyPromptLookup drafts by n-gram prompt lookup (the latest earlier occurrence of the longest matching "
            "n-gram, n from max_ngram_size down to min_ngram_size)")
        reads = ("lookup_len (the matched n-gram's length) and lookup_freq (the share of the earlier occurrences of "
                 "the matched n-gram followed by the drafted tokens before m that token m follows)")
        constants = ["#: Defaults of PolicyPromptLookup: the n-gram lengths and the longest draft of the policy's "
                     "run where its champion file records them, else 3, 1 and 8 (constructor arguments).",
                     f"MAX_NGRAM, MIN_NGRAM, GAMMA = {int(ngram[0])}, {int(ngram[1])}, {int(gamma)}"]
        functions = [core_source(f).rstrip("\n") for f in (_occurrences, lookup_match, lookup_columns)]
        body = _LOOKUP_CLASS
    else:
        cls, imports, drafting = suffix_part.CLASS_NAME, suffix_part.IMPORT, suffix_part.DOC
        reads = ("the suffix columns (suffix_match_len, the uncapped match length; suffix_prob, token m's estimated "
                 "probability after the drafts before it; suffix_cumprob, their product; suffix_score, the draft's "
                 "score; suffix_from_cache, 1 where the draft comes from earlier responses)")
        constants, functions = suffix_part.source_parts(suffix[0], suffix[1], gamma)
        body = suffix_part.CLASS
    libraries = (f"math, numpy and {host.library}" if suffix is None
                 else f"math, numpy, {host.library} and arctic_inference")
    doc = (f'"""Verification-length policy {shown(rule.name)} as a {host.engine} draft model, exported by '
           f'specdec-evolve.\n\nGenerated; do not edit. Standalone: imports only {libraries}.\n\n'
           f'{host.usage(cls)}\n\n'
           + _doc_paragraph(
               f"{drafting}; it drafts token m only where keep_drafting, the policy, is 1 on the decision's columns: "
               f"draft_index m, position (tokens generated before the block) + m, {reads}, and the text's history "
               f"(prev_verified, prev_accepted, accept_ewma, first_hit_ewma, since_reject: the History class below, "
               f"advanced at each call by the previous call's outcome, read from how far the text grew past its "
               f"draft). {host.calls}") + "\n\n"
           + ("" if suffix is None else _doc_paragraph(suffix_part.CACHE_DOC) + "\n\n")
           + "".join(f"{_doc_paragraph(note)}\n\n" for note in notes)
           + 'The policy, as exported for numpy (keep_drafting):\n"""')
    base = _BASE.replace("BASE_CLASS", host.base).replace("ENGINE_NAME", host.engine)
    parts = [doc, "from __future__ import annotations", "", *host.imports,
             *([imports] if imports else []), policy[body_start:].rstrip("\n"), "", *constants,
             f"NEEDS_COLUMNS = {any(f not in COMMON_VALUES for f in features)!r}",
             f"_VALUES = {{{values}}}", *functions,
             base.rstrip("\n"), body.rstrip("\n"), *([host.tail.replace("DRAFTER_CLASS", cls).rstrip("\n")]
                                                      if host.tail else []), ""]
    return "\n".join(parts)


def _doc_paragraph(text: str) -> str:
    """``text`` as a paragraph of the generated docstring: wrapped at 100 columns, every character that is not
    printable, a backslash or a double quote written as '?' (no text from a file path reaches the module's source
    unchecked)."""
    import textwrap

    return textwrap.fill("".join(c if c.isprintable() and c not in '\\"' else "?" for c in text), 100)


def _harvest_settings(source: str, host: Host = LLAMA) -> tuple[tuple[int, int], tuple[int, int] | None, int]:
    """(the n-gram lengths (longest, shortest), the suffix-decoding settings (tree depth, cached responses) or None,
    the longest draft) a champion file's run records, checked as the module's classes check them (max >= min >= 1,
    num_pred_tokens >= 1; :func:`evolve.export.engines.llama_cpp_python_suffix.harvest_settings`), else the defaults.

    The drafter is the harvest's (:func:`evolve.export.engines.deploy.harvest_drafter`): suffix decoding's settings
    only for a suffix-decoding harvest.

    Raises: InputError naming the file and key for a value a class would refuse at call time (a boolean, a
    non-integer, min above max, a count below 1 or above :data:`MAX_GAMMA`), or a harvest whose drafter the module
    of ``host`` does not run (a draft model, an EAGLE head)."""
    prov = read_champion(source).provenance or {}
    run = prov.get("config") if isinstance(prov.get("config"), dict) else {}
    drafter = harvest_drafter(source)
    if drafter.kind and drafter.family not in DRAFTERS:
        raise InputError(f"{source}: the champion's harvest drafted with '{drafter.kind}' "
                         f"(provenance.data.generator_config.drafter.kind), and the {host.engine} module drafts "
                         f"by prompt lookup or suffix decoding only, so the policy would run on drafts it was not "
                         f"tuned on; nearest: {host.nearest_model}")
    suffix = None
    if drafter.family is EngineFamily.SUFFIX:
        found = ((prov.get("data") or {}).get("generator_config") or {}).get("drafter") or {}
        suffix = suffix_part.harvest_settings(found, source)
    ngram, gamma = drafter.ngram or DEFAULT_LOOKUP, 8
    if "gamma" in run:
        value = run["gamma"]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_GAMMA:
            raise InputError(f"{source}: key 'provenance.config.gamma' is {value!r}, not a draft length in "
                             f"1..{MAX_GAMMA}")
        gamma = value
    return ngram, suffix, gamma


def drafter_of(source: str, data=None) -> EngineFamily:
    """The drafter family the module of a champion read from ``source`` drafts with: its harvest's (with a dataset
    ``data``, checked against the dataset's: :func:`evolve.export.engines.deploy.harvest_drafter`) where the module
    runs it (:data:`DRAFTERS`), else prompt lookup. Raises: InputError as ``harvest_drafter``."""
    family = harvest_drafter(source, data).family
    return family if family in DRAFTERS else EngineFamily.LOOKUP


def champion_module(spec: str, champions_dir: str | os.PathLike | None = None, host: Host = LLAMA) -> tuple[Rule, str]:
    """(rule, :func:`module_source` text) of ``spec`` (a champion file, run directory or rule name:
    :func:`evolve.export.exporter.resolve_rule`), the module's defaults the n-gram lengths and the draft length of
    the champion's run where its file records them (the harvest drafter's ``max`` and ``min``, the run's
    ``gamma``), else prompt lookup 3..1 and 8 drafts.

    Raises: InputError as :func:`evolve.export.exporter.resolve_rule`, :func:`check_policy` and
    :func:`_harvest_settings`."""
    rule, source = resolve_rule(spec, champions_dir)
    return rule, policy_module(rule, source, host=host)


def policy_module(rule: Rule, source: str, notes: tuple[str, ...] = (), host: Host = LLAMA) -> str:
    """:func:`module_source` of ``rule`` (the champion read from ``source``, or a setting written in its place: the
    module's defaults are those of the champion's run, as :func:`champion_module`), with ``notes`` in its docstring.

    Raises: InputError as :func:`check_policy` and :func:`_harvest_settings`."""
    return _render(Setting("the policy", rule, {}), Provenance(rule.name, rule.expression or "", source, rule.kind,
                                                               True), notes=notes, host=host)


__all__ = ["COLUMN_VALUES", "COMMON_VALUES", "COST_ENGINE", "DRAFTERS", "ENGINE", "Host", "LLAMA", "MAX_GAMMA", "NAME",
           "SUFFIX_VALUES", "VERSION", "champion_module", "check_policy", "drafter_of", "module_source", "policy_module",
           "runs"]
