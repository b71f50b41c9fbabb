"""The settings of a harvest (:class:`HarvestConfig`) and the parsers of its list-valued options.

Every field of :class:`HarvestConfig` is a ``generate_data.py harvest`` option of the
same name (``skip_layers`` is ``--draft-skip-layers``, ``window`` is
``--draft-window``), so its errors name the option the value came from.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from evolve.errors import InputError

#: Torch dtypes the models can run in.
DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class HarvestConfig:
    """Everything a harvest depends on (the CLI options).

    Exactly one drafter: ``draft`` (path of a second model), ``skip_layers`` (0-based decoder
    layer indices of the target to skip) or ``window`` ((sink, recent) token counts).
    ``temperature`` 0 means greedy decoding; ``top_k`` (0: off) and ``top_p`` (1: off) truncate
    both models' distributions after the temperature (:func:`evolve.engine.distributions.distributions`).
    ``dtype`` is the torch dtype the models run in, ``threads`` the torch CPU thread count (None:
    torch's default), ``batch_size`` the number of texts decoded together.
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

    @property
    def drafter_kind(self) -> str:
        """``model``, ``skip_layers`` or ``window``."""
        return "model" if self.draft is not None else "skip_layers" if self.skip_layers is not None else "window"

    def check(self) -> None:
        """Validate option values (not the files). Raises InputError naming the option."""
        chosen = [name for name, v in (("--draft", self.draft), ("--draft-skip-layers", self.skip_layers),
                                       ("--draft-window", self.window)) if v is not None]
        if len(chosen) != 1:
            what = "none was given" if not chosen else f"got {' and '.join(chosen)}"
            raise InputError(f"options '--draft', '--draft-skip-layers', '--draft-window': "
                             f"choose exactly one drafter ({what})")
        if self.gamma < 1:
            raise InputError(f"option '--gamma': must be at least 1 (value {self.gamma})")
        if self.max_new_tokens < 2:
            raise InputError(f"option '--max-new-tokens': must be at least 2 so that a block is drafted "
                             f"(value {self.max_new_tokens})")
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise InputError(f"option '--temperature': must be a finite number >= 0 (value {self.temperature})")
        if self.top_k < 0:
            raise InputError(f"option '--top-k': must be >= 0, 0 meaning off (value {self.top_k})")
        if not (math.isfinite(self.top_p) and 0 < self.top_p <= 1):
            raise InputError(f"option '--top-p': must be in (0, 1], 1 meaning off (value {self.top_p})")
        if self.batch_size < 1:
            raise InputError(f"option '--batch-size': must be at least 1 (value {self.batch_size})")
        if self.seed < 0:
            raise InputError(f"option '--seed': must be >= 0 (value {self.seed})")
        if self.threads is not None and self.threads < 1:
            raise InputError(f"option '--threads': must be at least 1 (value {self.threads})")
        if self.dtype not in DTYPES:
            raise InputError(f"option '--dtype': unknown dtype '{self.dtype}' (choose from {', '.join(DTYPES)})")
        if self.skip_layers is not None:
            if not self.skip_layers:
                raise InputError("option '--draft-skip-layers': the list is empty")
            if any(i < 0 for i in self.skip_layers):
                raise InputError(f"option '--draft-skip-layers': layer indices are >= 0 (value {min(self.skip_layers)})")
        if self.window is not None:
            sink, recent = self.window
            if sink < 0 or recent < 1:
                raise InputError(f"option '--draft-window': SINK must be >= 0 and RECENT >= 1 "
                                 f"(value {sink},{recent})")


def parse_layer_list(text: str, option: str = "--draft-skip-layers") -> tuple[int, ...]:
    """Parse ``"1,3,5-7"`` into sorted unique 0-based layer indices ``(1, 3, 5, 6, 7)``.

    Raises: InputError naming ``option`` and the bad item.
    """
    out: set[int] = set()
    items = [s.strip() for s in text.split(",")]
    if not any(items):
        raise InputError(f"option '{option}': the list is empty (value {text!r})")
    for item in items:
        try:
            if "-" in item[1:]:
                lo, hi = item.split("-", 1) if not item.startswith("-") else (item, "")
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                out.update(range(a, b + 1))
            else:
                out.add(int(item))
        except ValueError:
            raise InputError(f"option '{option}': '{item}' is not a layer index or a range A-B "
                             f"(value {text!r})") from None
    if min(out) < 0:
        raise InputError(f"option '{option}': layer indices are >= 0 (value {text!r})")
    return tuple(sorted(out))


def parse_window(text: str, option: str = "--draft-window") -> tuple[int, int]:
    """Parse ``"SINK,RECENT"`` (e.g. ``"4,64"``) into two ints. Raises: InputError."""
    parts = [s.strip() for s in text.split(",")]
    try:
        if len(parts) != 2:
            raise ValueError
        sink, recent = int(parts[0]), int(parts[1])
    except ValueError:
        raise InputError(f"option '{option}': expected SINK,RECENT, two integers such as 4,64 "
                         f"(value {text!r})") from None
    if sink < 0 or recent < 1:
        raise InputError(f"option '{option}': SINK must be >= 0 and RECENT >= 1 (value {text!r})")
    return sink, recent
