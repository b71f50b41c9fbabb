"""The mean context of a harvested dataset's texts: the tokens of context before each token the harvest emitted
(its prompt's, the earlier turns' included, and the answer's so far), averaged over the emitted tokens. A cost file
timed at two contexts (:mod:`evolve.eval.costs`, ``long_context``) prices the dataset's calls at it
(:meth:`evolve.eval.costs.Costs.at_context`), so a prediction on the records is one for texts of that length.
"""
from __future__ import annotations

import os
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from evolve.errors import InputWarning
from evolve.harvest.resume import TEXTS_FILE
from evolve.harvest.subset import read_texts


def mean_context(data_dir: str | os.PathLike | None, splits: Iterable[str] | None = None) -> float | None:
    """Tokens of context before an emitted token, averaged over the tokens of the texts of ``splits`` (None: all)
    that ``texts.jsonl`` of the dataset ``data_dir`` lists: sum over texts of p m + m (m - 1) / 2 over the sum of m,
    p a text's ``prompt_tokens`` (the length of its ``prompt_ids`` in a harvest written before it was recorded) and m
    its ``tokens``. None for a dataset without ``texts.jsonl`` (a synthetic one), ``data_dir`` None, no tokens, or a
    text whose prompt length the file does not give (an older harvest of a drafter without a shared cache).

    Raises: InputError as :func:`evolve.harvest.subset.read_texts` for a text list that is not the dataset's."""
    if data_dir is None:
        return None
    path = Path(data_dir).resolve() / TEXTS_FILE
    if not path.is_file():
        return None
    st = path.stat()
    return _mean_context(str(path), st.st_size, st.st_mtime_ns, None if splits is None else tuple(splits))


def at_dataset_context(costs, data_dir: str | os.PathLike | None):
    """``costs`` (a :class:`evolve.eval.costs.Costs`) priced at the mean context of the dataset ``data_dir``
    (:func:`mean_context`) when its file was timed at two contexts (``long_context``); else ``costs`` itself (the
    text list is then not read; a model already priced has no ``long_context`` left). A harvest whose text list gives
    no prompt lengths is priced as timed, with an InputWarning naming the file. Raises: InputError as
    :func:`mean_context`."""
    if not costs.extra.get("long_context"):
        return costs
    context = mean_context(data_dir)
    if context is None and data_dir is not None and (Path(data_dir) / TEXTS_FILE).is_file():
        warnings.warn(InputWarning(f"{Path(data_dir) / TEXTS_FILE}: gives no prompt lengths (a harvest written before "
                                   f"they were recorded), so {costs.source} is used at the "
                                   f"{costs.context_tokens:.0f} tokens of context it was timed after, whatever the "
                                   f"texts' length"), stacklevel=2)
    return costs.at_context(context)


@lru_cache(maxsize=32)
def _mean_context(path: str, size: int, mtime_ns: int, splits: tuple[str, ...] | None) -> float | None:
    """:func:`mean_context` of one state of the text list ``path`` (read once per state)."""
    total = weight = 0
    for text in read_texts(Path(path).parent, categories=False):
        if splits is not None and text["split"] not in splits:
            continue
        p = text.get("prompt_tokens", len(text["prompt_ids"]) if isinstance(text.get("prompt_ids"), list) else None)
        if p is None:
            return None
        p, m = int(p), int(text.get("tokens", 0))
        total += p * m + m * (m - 1) // 2
        weight += m
    return total / weight if weight else None


__all__ = ["at_dataset_context", "mean_context"]
