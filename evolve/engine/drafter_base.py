"""Base classes of the drafters and the plain-data spec of a drafter's option (:class:`DrafterOption`); each
drafter is a module of its own, :mod:`evolve.engine.drafters` their registry.

:class:`Drafter` is what the engine calls (settings, start, propose, commit); :class:`_SelfDrafter`
runs (part of) the target on the target's own KV cache and crops it back; :func:`kept_layers_model`
builds the target restricted to some of its decoder layers (weights shared, nothing copied).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Sequence

import numpy as np

from evolve.errors import InputError
from evolve.engine.distributions import sample_index
from evolve.engine.onehot import OneHot
from evolve.engine.runner import BatchKV, Runner


#: The value types a drafter's option may declare (:attr:`DrafterOption.value`), parsed by the command line
#: (:mod:`evolve.cli.drafters`) into: ``path`` a string naming a file or directory the drafter reads (a draft model,
#: a head), which the command line declares as an input path, so it is in the command's input inventory
#: (:mod:`evolve.cli.inventory`: no output may land on it) with no list of names; ``count`` an int >= 1; ``counts``
#: a tuple of ints >= 1 (``3,1``); ``pair`` a tuple of two ints (``4,64``); ``layers`` sorted unique 0-based layer
#: indices (``2,4,6-9``).
VALUE_TYPES: tuple[str, ...] = ("path", "count", "counts", "pair", "layers")
#: The largest integer each value type takes (a layer count or index: deeper than any published model; a window or
#: an n-gram length, in tokens: longer than any context), stated in the options' help.
VALUE_LIMITS: dict[str, int] = {"count": 4096, "counts": 1 << 20, "pair": 1 << 20, "layers": 4095}


@dataclass(frozen=True)
class DrafterOption:
    """A drafter's command-line option, as plain data: the commands that take a drafter (``generate_data.py
    harvest``, ``benchmark.py live``, ``benchmark.py perf --write-costs``) build it from the registry
    (:mod:`evolve.cli.drafters`); its parameter is the drafter's ``field``.

    Attributes:
        flag: the option, e.g. ``--draft-ngram``.
        metavar: what the help shows for the value, e.g. ``MAX[,MIN]``.
        help: the help text.
        value: one of :data:`VALUE_TYPES`, or a callable parsing the option's text into the value (raising
            ValueError with a one-line message for a bad one).
    """

    flag: str
    metavar: str
    help: str
    value: Any = "path"


def _shallow(module):
    """A copy of an nn.Module that shares its parameters, buffers and submodules."""
    c = copy.copy(module)
    c._modules = dict(module._modules)
    c._parameters = dict(module._parameters)
    c._buffers = dict(module._buffers)
    return c


#: ``keep(row, probs, tops, entropies[, lookahead]) -> bool``: whether a row drafts one more token
#: (:meth:`Drafter.propose`).
Keep = Callable[..., bool]


def draft_confidence(row, x: int) -> tuple[float, float]:
    """(q(x), max q) of one draft distribution row: float64 (V,), or a :class:`OneHot` row (1, 1)."""
    if isinstance(row, OneHot):
        return 1.0, 1.0
    return float(row[x]), float(row.max())


def _stack(rows: list):
    """One row per drafted token -> (k, V) float64, or :class:`OneHot` rows (greedy), or None for none."""
    if not rows:
        return None
    if isinstance(rows[0], OneHot):
        return OneHot(np.asarray([int(r.ids) for r in rows], dtype=np.int64), rows[0].vocab)
    return np.stack(rows)


class EngineFamily(str, Enum):
    """What an inference engine must draft with for a harvested drafter's traces to mean what they were scored as:
    the families the engines' speculation methods take (an engine target maps families, never drafter names, to its
    methods: :mod:`evolve.export.engines`)."""

    #: Prompt lookup: drafts copied from the context, no model (vLLM ``ngram``, llama.cpp ``ngram-simple``).
    LOOKUP = "lookup"
    #: A second, smaller model sharing the tokenizer (vLLM ``draft_model``, llama.cpp ``draft-simple``).
    DRAFT_MODEL = "draft model"
    #: An EAGLE-style head on the target's hidden states (vLLM ``eagle3``, llama.cpp ``draft-eagle3``).
    EAGLE_HEAD = "eagle head"
    #: Suffix decoding: drafts from suffix trees of the prompt and of earlier responses, no model (vLLM ``suffix``).
    SUFFIX = "suffix"
    #: The target itself with fewer layers or a shorter context (layer skipping, early exit): no engine ships it.
    SELF = "self-speculation"


class Drafter:
    """Base class: proposes up to k_i tokens for every row of a batch, with their full draft distributions.

    The ``engine`` argument of the methods is the :class:`evolve.harvest.loop.SpeculativeEngine`
    running the drafter (its ``sampling`` settings and ``eos`` ids are read); ``batch`` is its
    :class:`evolve.harvest.loop.Batch` (``batch.rows[i]`` the state of row i's text or None,
    ``batch.kv`` the target's :class:`evolve.engine.runner.BatchKV`).
    """

    #: The drafter's name (``model``, ``skip_layers``, ...), written as ``kind`` into the dataset's metadata.
    name = ""
    #: The :class:`evolve.harvest.config.HarvestConfig` field (and command-line parameter) selecting it.
    field = ""
    #: Its command-line option (None: none; every registered drafter has one).
    option: DrafterOption | None = None
    #: Whether its value is the path of a second model, which the backend loads (the model drafter).
    draft_model = False
    #: Whether it runs no model at all (so it runs on every backend: :mod:`evolve.engine.backends`).
    model_free = False
    #: {backend name: why the drafter cannot run there} (a backend refuses it in one line with the reason).
    unsupported: dict[str, str] = {}
    #: Whether it can grow a draft tree for a tree harvest: a torch model run over a tree with :meth:`Runner.tree`
    #: (:mod:`evolve.engine.tree_draft`), or, with :attr:`deterministic_trees`, a tree of its own (:meth:`tree_step`).
    grows_trees = False
    #: Whether its draft trees are deterministic: distinct siblings, each proposed with certainty (q one-hot), grown
    #: without a model by :meth:`tree_step` between :meth:`open_text` and :meth:`close_text` (suffix decoding).
    deterministic_trees = False
    #: The columns :meth:`draft_columns` writes and :meth:`lookahead` gives before drafting a token.
    lookahead_columns: tuple[str, ...] = ()
    #: What an engine drafts with to run what this drafter's traces score (:class:`EngineFamily`).
    family: EngineFamily = EngineFamily.SELF
    #: Whether its drafts for a text depend on the texts decoded before (a cache shared across requests): a harvest
    #: then decodes its splits in order, one text at a time, and replays finished texts into it (:meth:`warm`).
    cross_request = False

    @classmethod
    def check_value(cls, value) -> None:
        """Validate the option's value without the models (InputError with ``param=cls.field``)."""

    @classmethod
    def check_config(cls, config) -> None:
        """Validate the other settings the drafter needs (``config`` a HarvestConfig), without the models
        (InputError naming the setting)."""

    @classmethod
    def build(cls, target, draft, value, vocab: int, device: str) -> "Drafter":
        """The drafter for the option's ``value`` (``draft`` the loaded draft model or None)."""
        raise NotImplementedError

    def settings(self) -> dict[str, Any]:
        """The drafter's name (key ``kind``, the key of earlier datasets) and parameters, as written into the
        dataset's metadata."""
        raise NotImplementedError

    def start(self, engine, batch, row: int) -> None:
        """Prepare drafter state for the new text of ``row`` (``batch.rows[row].ctx`` is its prompt)."""

    def draft_columns(self, ctx: Sequence[int], drafts: Sequence[int]) -> dict[str, np.ndarray]:
        """Schema columns only this drafter writes, for the tokens ``drafts`` it drafted after ``ctx``: {column:
        array (len(drafts),)}; none by default (prompt lookup: :data:`evolve.traces.schema.LOOKUP_COLUMNS`)."""
        return {}

    def lookahead(self, engine, ctx: Sequence[int], drafted: int = 0) -> dict[str, float]:
        """The :meth:`draft_columns` of the token this drafter would draft after ``drafted`` tokens of a block
        started after ``ctx``, where it knows them before drafting it (a drafter without a model: free); {} when
        it does not (every drafter that runs a model) or drafts nothing there."""
        return {}

    def propose(self, engine, batch, ks: Sequence[int], keep: Keep | None = None):
        """Draft up to ``ks[i]`` tokens for row i (stopping after an end-of-sequence token).

        Each draft is sampled from q with one uniform of the row's own random stream. ``keep``: after
        each drafted token, ``keep(i, probs, tops, entropies)`` decides whether row i drafts one more
        (the lists hold, for the row's drafts so far, q(x) and max q (probabilities) and the entropy
        of q (nats)); a drafter with :meth:`lookahead` columns passes the next token's as a fifth argument
        (computed only when ``keep.lookahead`` is true or absent); None: draft up to ``ks[i]`` (a
        verification-length policy, live).
        Returns: per row (token ids list, q float64 (k'_i, V), entropies float64 (k'_i,)); rows with
        ``ks[i] == 0`` get an empty list and None.
        """
        raise NotImplementedError

    def commit(self, engine, batch, valid: Sequence[int | None]) -> None:
        """Keep drafter state for the first ``valid[i]`` context tokens of row i (None: row unchanged)."""

    def finish(self, engine, batch, row: int) -> None:
        """The text of ``row`` is done (its state still in ``batch.rows[row]``): release what the drafter holds for
        it."""

    def fresh(self) -> "Drafter":
        """A drafter of the same settings with none of this one's state shared across texts (a live row's own, for a
        :attr:`cross_request` drafter); the drafter itself for the others."""
        return self

    def warm(self, req, prompt: Sequence[int], response: Sequence[int]) -> None:
        """Replay a finished text (token ids of its ``prompt`` and ``response``) into the drafter's state shared across
        texts (a :attr:`cross_request` drafter; nothing for the others)."""

    def open_text(self, prompt: Sequence[int]) -> None:
        """A tree harvest starts a text whose prompt is ``prompt`` (a :attr:`deterministic_trees` drafter)."""
        raise NotImplementedError(f"drafter {self.name!r} grows no deterministic tree")

    def close_text(self, ctx: Sequence[int]) -> None:
        """A tree harvest's text ends, its whole text ``ctx`` (a :attr:`deterministic_trees` drafter)."""
        raise NotImplementedError(f"drafter {self.name!r} grows no deterministic tree")

    def tree_step(self, engine, kv, ctx: Sequence[int], rng, nodes: int, width: int, max_depth: int):
        """One tree step of a :attr:`deterministic_trees` drafter (as :func:`evolve.engine.tree_draft.tree_step`,
        without the drafter's cache). Raises: NotImplementedError for the others."""
        raise NotImplementedError(f"drafter {self.name!r} grows no deterministic tree")

    def _draft_loop(self, kv: BatchKV, batch, feeds, ks, engine, allowed=None, keep=None):
        """Draft autoregressively with the drafter's own runner (``self.run``, a :class:`Runner`) on ``kv``:
        row i is fed ``feeds[i]``, then its own drafts, until ``ks[i]`` tokens, an EOS or ``keep`` says stop;
        ``allowed`` the attention mask rule of :meth:`Runner.__call__`. Returns as :meth:`propose`."""
        run = self.run
        rows = range(len(ks))
        drafts: list[list[int]] = [[] for _ in rows]
        dists: list[list] = [[] for _ in rows]
        ents: list[list] = [[] for _ in rows]
        probs: list[list[float]] = [[] for _ in rows]
        tops: list[list[float]] = [[] for _ in rows]
        feeds = [list(f) if k else [] for f, k in zip(feeds, ks)]
        while any(feeds):
            logits = run(kv, feeds, 1, allowed)
            live = [i for i in rows if feeds[i]]
            q, h = engine.distributions(logits[live, -1])
            for r, i in enumerate(live):
                x = sample_index(q[r], batch.rows[i].rng.random())
                drafts[i].append(x)
                dists[i].append(q[r])
                ents[i].append(h[r])
                done = x in engine.eos or len(drafts[i]) >= ks[i]
                if keep is not None and not done:
                    prob, top = draft_confidence(q[r], x)
                    probs[i].append(prob)
                    tops[i].append(top)
                    done = not keep(i, probs[i], tops[i], ents[i])
                feeds[i] = [] if done else [x]
        return [(drafts[i], _stack(dists[i]), np.asarray(ents[i])) for i in rows]


class _SelfDrafter(Drafter):
    """A drafter that runs (part of) the target on the target's own KV cache, then crops it back."""

    def __init__(self, model, vocab: int, device: str):
        self.run = Runner(model, vocab, device)

    def allowed(self):
        """``allowed(i, j)``: may query position i attend to key position j (beyond causality)?

        Self-drafters always pass an explicit mask: a skipped layer's cache lags behind during drafting,
        so the model must not derive the mask from the cache length."""
        return lambda i, j: j >= 0

    def propose(self, engine, batch, ks, keep=None):
        kv = batch.kv
        slots, lengths = kv.slots, list(kv.lengths)
        feeds = [r.ctx[kv.lengths[i]:] if r is not None else [] for i, r in enumerate(batch.rows)]
        try:
            return self._draft_loop(kv, batch, feeds, ks, engine, self.allowed(), keep)
        finally:
            kv.crop(slots, lengths)



def kept_layers_model(target, keep: Sequence[int], param: str):
    """A shallow copy of the target's causal LM whose ``model.layers`` holds only the decoder layers ``keep``
    (0-based, increasing), with the target's final norm and LM head; weights and buffers are shared.

    Raises InputError (``param``) when the target keeps no ``model.model.layers`` (Llama-like models only).
    """
    import torch

    model = target.model
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if not isinstance(layers, torch.nn.ModuleList):
        raise InputError(f"the target's architecture ({type(model).__name__}) keeps no decoder layers in "
                         f"model.model.layers; layer skipping supports Llama-like models only", param=param)
    draft_inner = _shallow(inner)
    draft_inner.layers = torch.nn.ModuleList([layers[i] for i in keep])
    draft = _shallow(model)
    draft.model = draft_inner
    return draft


def target_layers(target, param: str) -> int:
    """Number of decoder layers of a Llama-like target (InputError ``param`` for another architecture)."""
    import torch

    layers = getattr(getattr(target.model, "model", None), "layers", None)
    if not isinstance(layers, torch.nn.ModuleList):
        raise InputError(f"the target's architecture ({type(target.model).__name__}) keeps no decoder layers in "
                         f"model.model.layers; layer skipping supports Llama-like models only", param=param)
    return len(layers)
