"""The settings of a harvest (:class:`HarvestConfig`).

Every field of :class:`HarvestConfig` is a ``generate_data.py harvest`` option of the
same name (``skip_layers`` is ``--draft-skip-layers``, ``window`` is
``--draft-window``, ``ngram`` is ``--draft-ngram``, ``exit_layer`` is ``--draft-exit-layer``); its errors name the field (:class:`evolve.errors.InputError`'s
``param``), which the command line shows as the option the value came from. The
command line parses the list-valued options (:mod:`evolve.cli.types`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from evolve.errors import InputError
from evolve.engine.backends import BACKEND_NAMES, BACKENDS
from evolve.engine.drafters import DRAFTER_FIELDS, DRAFTERS, chosen_drafters

#: Torch dtypes the models can run in.
DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class HarvestConfig:
    """Everything a harvest depends on (the CLI options).

    Exactly one drafter (:data:`evolve.engine.drafters.DRAFTERS`): ``draft`` (path of a second model),
    ``skip_layers`` (0-based decoder layer indices of the target to skip), ``window`` ((sink, recent)
    token counts), ``ngram`` ((max,) or (max, min) n-gram sizes of prompt lookup) or ``exit_layer``
    (early exit after the target's first K decoder layers).
    ``temperature`` 0 means greedy decoding; ``top_k`` (0: off) and ``top_p`` (1: off) truncate
    both models' distributions after the temperature (:func:`evolve.engine.distributions.distributions`).
    ``dtype`` is the torch dtype the models run in, ``threads`` the torch CPU thread count (None:
    torch's default), ``batch_size`` the number of texts decoded together, ``backend`` what runs the
    models (:mod:`evolve.engine.backends`: ``torch`` or ``llama_cpp``; llama.cpp uses ``threads`` too).
    ``tree_nodes`` (None: chain blocks of ``gamma`` drafts) makes it a tree harvest: every target call
    verifies a draft tree of at most that many nodes, grown with ``tree_width`` children per expansion
    (:mod:`evolve.harvest.trees`, docs/reference/trees.md); ``gamma`` is then not used.
    """

    target: str
    prompts: str
    draft: str | None = None
    skip_layers: tuple[int, ...] | None = None
    window: tuple[int, int] | None = None
    gamma: int = 5
    max_new_tokens: int = 128
    temperature: float = 1.0
    seed: int = 0
    out: str = "data/harvested"
    dtype: str = "float32"
    device: str = "cpu"
    threads: int | None = None
    top_k: int = 0
    top_p: float = 1.0
    batch_size: int = 1
    backend: str = "torch"
    ngram: tuple[int, ...] | None = None
    exit_layer: int | None = None
    tree_nodes: int | None = None
    tree_width: int = 2

    def check(self) -> None:
        """Validate the values (not the files). Raises InputError naming the field (``param``)."""
        chosen = [d.field for d in chosen_drafters(self)]
        if len(chosen) != 1:
            what = "none was given" if not chosen else f"got {' and '.join(chosen)}"
            raise InputError(f"drafter: choose exactly one of {', '.join(DRAFTER_FIELDS)} ({what})")
        if self.gamma < 1:
            raise InputError(f"must be at least 1 (value {self.gamma})", param="gamma")
        if self.max_new_tokens < 2:
            raise InputError(f"must be at least 2 so that a block is drafted (value {self.max_new_tokens})",
                             param="max_new_tokens")
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise InputError(f"must be a finite number >= 0 (value {self.temperature})", param="temperature")
        if self.top_k < 0:
            raise InputError(f"must be >= 0, 0 meaning off (value {self.top_k})", param="top_k")
        if not (math.isfinite(self.top_p) and 0 < self.top_p <= 1):
            raise InputError(f"must be in (0, 1], 1 meaning off (value {self.top_p})", param="top_p")
        if self.batch_size < 1:
            raise InputError(f"must be at least 1 (value {self.batch_size})", param="batch_size")
        if self.seed < 0:
            raise InputError(f"must be >= 0 (value {self.seed})", param="seed")
        if self.threads is not None and self.threads < 1:
            raise InputError(f"must be at least 1 (value {self.threads})", param="threads")
        if self.backend not in BACKEND_NAMES:
            raise InputError(f"unknown backend '{self.backend}' (choose from {', '.join(BACKEND_NAMES)})",
                             param="backend")
        if self.dtype not in DTYPES:
            raise InputError(f"unknown dtype '{self.dtype}' (choose from {', '.join(DTYPES)})", param="dtype")
        for drafter in chosen_drafters(self):
            drafter.check_value(getattr(self, drafter.field))
        self.check_tree()

    def check_tree(self) -> None:
        """Validate the draft-tree fields and refuse what a tree harvest cannot run (InputError naming the field)."""
        if self.tree_nodes is None:
            if self.tree_width != 2:
                raise InputError(f"is used only by a tree harvest, with tree_nodes (value {self.tree_width})",
                                 param="tree_width")
            return
        if self.tree_nodes < 1:
            raise InputError(f"must be at least 1 (value {self.tree_nodes})", param="tree_nodes")
        if self.tree_width < 1:
            raise InputError(f"must be at least 1 (value {self.tree_width})", param="tree_width")
        for drafter in chosen_drafters(self):
            if not drafter.grows_trees:
                can = ", ".join(d.field for d in DRAFTERS if d.grows_trees)
                raise InputError(f"this drafter cannot grow a draft tree (tree_nodes); trees take one of the "
                                 f"drafters {can}", param=drafter.field)
        if self.temperature == 0:
            raise InputError("must be > 0 for a draft tree (tree_nodes): at temperature 0 every sibling "
                             "would be the same token (value 0)", param="temperature")
        if not BACKENDS[self.backend].grows_trees:
            raise InputError(f"draft trees (tree_nodes) run on the torch backend only (value {self.backend})",
                             param="backend")
        if self.batch_size != 1:
            raise InputError(f"draft trees (tree_nodes) decode one text at a time: must be 1 "
                             f"(value {self.batch_size})", param="batch_size")
