"""The settings of a harvest (:class:`HarvestConfig`).

Every field of :class:`HarvestConfig` is a ``generate_data.py harvest`` option of the
same name; the drafter's option (``draft``, ``skip_layers``, ``ngram``, ... of the drafters'
registry, :data:`evolve.engine.drafters.DRAFTERS`; ``--draft``, ``--draft-skip-layers``, ...) is a
keyword of the constructor and an attribute too, kept in ``drafters``. Its errors name the field
(:class:`evolve.errors.InputError`'s ``param``), which the command line shows as the option the
value came from. The command line parses the list-valued options (:mod:`evolve.cli.types`).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from evolve.errors import InputError
from evolve.engine.backends import BACKENDS, backend_names
from evolve.engine.drafters import DRAFTERS, chosen_drafters, drafter_fields, drafter_of

#: Torch dtypes the models can run in.
DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True, init=False)
class HarvestConfig:
    """Everything a harvest depends on (the CLI options).

    Exactly one drafter (:data:`evolve.engine.drafters.DRAFTERS`), given to the constructor as the keyword
    of its field and read back as an attribute of that name (None when not given): ``draft`` (path of a
    second model), ``skip_layers`` (0-based decoder layer indices of the target to skip), ``window``
    ((sink, recent) token counts), ``ngram`` ((max,) or (max, min) n-gram sizes of prompt lookup),
    ``exit_layer`` (early exit after the target's first K decoder layers), ``eagle`` (the directory of an
    EAGLE-3 head), or any drafter registered later. ``drafters`` holds them as (field, value) pairs in the registry's order.
    ``temperature`` 0 means greedy decoding; ``top_k`` (0: off) and ``top_p`` (1: off) truncate
    both models' distributions after the temperature (:func:`evolve.engine.distributions.distributions`).
    ``dtype`` is the torch dtype the models run in, ``threads`` the torch CPU thread count (None:
    torch's default), ``batch_size`` the number of texts decoded together, ``backend`` what runs the
    models (:mod:`evolve.engine.backends`: ``torch`` or ``llama_cpp``; llama.cpp uses ``threads`` too).
    ``tree_nodes`` (None: chain blocks of ``gamma`` drafts) makes it a tree harvest: every target call
    verifies a draft tree of at most that many nodes, grown with ``tree_width`` children per expansion
    (:mod:`evolve.harvest.tree_harvest`, docs/reference/trees.md); ``gamma`` is then not used.
    ``categories`` (None: all) keeps only the questions of these categories of a structured prompts file
    (:meth:`evolve.harvest.prompts.PromptFile.select`).
    """

    target: str
    prompts: str
    drafters: tuple[tuple[str, Any], ...] = ()
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
    tree_nodes: int | None = None
    tree_width: int = 2
    categories: tuple[str, ...] | None = None

    def __init__(self, target: str, prompts: str, **options: Any):
        """``options``: the fields above by name, and the drafters' fields (a value or None).
        Raises TypeError for a keyword that is neither."""
        values: dict[str, Any] = dict(options.pop("drafters", ()))
        for f in fields(self):
            if f.name in ("target", "prompts", "drafters"):
                continue
            object.__setattr__(self, f.name, options.pop(f.name) if f.name in options else f.default)
        for name, value in options.items():
            if drafter_of(name) is None:
                raise TypeError(f"HarvestConfig: unexpected keyword '{name}' (not a field nor a drafter's)")
            values[name] = value
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "prompts", prompts)
        object.__setattr__(self, "drafters", tuple((name, values[name]) for name in drafter_fields()
                                                   if values.get(name) is not None))

    def __getattr__(self, name: str) -> Any:
        """A drafter's field: its value, None when not given."""
        if name.startswith("__") or drafter_of(name) is None:
            raise AttributeError(name)
        return dict(self.__dict__.get("drafters", ())).get(name)

    @property
    def draft_model(self) -> str | None:
        """The path of the second model the drafter needs (the model drafter's value), or None."""
        return next((v for name, v in self.drafters if drafter_of(name).draft_model), None)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a flat dict (as written into a dataset's metadata): every registered drafter's field
        with its value or None, no ``drafters``."""
        d = asdict(self)
        del d["drafters"]
        if d["categories"] is None:  # written only when given, so the metadata of other harvests is as before
            del d["categories"]
        else:
            d["categories"] = list(d["categories"])
        given = dict(self.drafters)
        return {"target": d.pop("target"), "prompts": d.pop("prompts"),
                **{name: given.get(name) for name in drafter_fields()}, **d}

    def check(self) -> None:
        """Validate the values (not the files). Raises InputError naming the field (``param``)."""
        chosen = [d.field for d in chosen_drafters(self)]
        if len(chosen) != 1:
            what = "none was given" if not chosen else f"got {' and '.join(chosen)}"
            raise InputError(f"drafter: choose exactly one of {', '.join(drafter_fields())} ({what})")
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
        if self.backend not in BACKENDS:
            raise InputError(f"unknown backend '{self.backend}' (choose from {', '.join(backend_names())})",
                             param="backend")
        if self.dtype not in DTYPES:
            raise InputError(f"unknown dtype '{self.dtype}' (choose from {', '.join(DTYPES)})", param="dtype")
        for drafter in chosen_drafters(self):
            drafter.check_value(getattr(self, drafter.field))
            drafter.check_config(self)
        if self.categories is not None and not self.categories:
            raise InputError("give at least one category", param="categories")
        self.check_tree()

    def check_tree(self, greedy: bool = False) -> None:
        """Validate the draft-tree fields and refuse what a tree harvest cannot run (InputError naming the field).
        ``greedy``: allow temperature 0 (live decoding: lossless, though every sibling repeats the first)."""
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
        deterministic = all(d.deterministic_trees for d in chosen_drafters(self))
        if self.temperature == 0 and not (greedy or deterministic):
            raise InputError("must be > 0 for a draft tree (tree_nodes): at temperature 0 every sibling "
                             "would be the same token (value 0)", param="temperature")
        if not BACKENDS[self.backend].grows_trees:
            raise InputError(f"draft trees (tree_nodes) run on the torch backend only (value {self.backend})",
                             param="backend")
        if self.batch_size != 1:
            raise InputError(f"draft trees (tree_nodes) decode one text at a time: must be 1 "
                             f"(value {self.batch_size})", param="batch_size")
