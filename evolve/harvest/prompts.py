"""Prompts of a harvest: reading the prompts file, encoding a prompt, splitting texts by prompt.

Splits are by prompt, never within a text (:func:`assign_splits`): the prompts
are shuffled with ``numpy.random.default_rng(seed).permutation(n)``; the first
``max(1, round(0.1 n))`` go to valid, the next as many to test, the rest to train
(at least 3 prompts are required, so every split gets one). Texts are processed
in an order that interleaves the splits in proportion (:func:`processing_order`),
so an interrupted harvest still has every split.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from evolve.errors import InputError
from evolve.traces.io import SPLITS

#: Fraction of the prompts in each of valid and test (at least one prompt each).
HELD_OUT_FRACTION = 0.1


def read_prompts(path: str) -> tuple[list[str], list[int]]:
    """Read a prompts file: one prompt per line, blank lines ignored.

    Returns (prompts, 1-based line numbers). Raises: InputError (parameter ``prompts``) for a missing,
    unreadable or non-UTF-8 file, or one without prompts.
    """
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{path}: is a directory, expected a text file", param="prompts")
    if not p.is_file():
        raise InputError(f"{path}: no such file", param="prompts")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})", param="prompts") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})", param="prompts") from None
    prompts, lines = [], []
    for i, line in enumerate(text.splitlines(), start=1):
        line = line.strip("\r\n")
        if line.strip():
            prompts.append(line)
            lines.append(i)
    if not prompts:
        raise InputError(f"{path}: no prompts (one prompt per non-blank line)", param="prompts")
    return prompts, lines


def assign_splits(n: int, seed: int) -> dict[str, list[int]]:
    """Split text indices 0..n-1 by prompt: {split: sorted indices}.

    Rule: ``rng = numpy.random.default_rng(seed)``, ``perm = rng.permutation(n)``,
    ``h = max(1, round(0.1 n))``; valid = perm[:h], test = perm[h:2h], train = the rest.
    Raises: InputError (parameter ``prompts``) if n < 3 (every split needs a prompt).
    """
    if n < 3:
        raise InputError(f"{n} prompt(s); at least 3 are needed, one per split (train, valid, test)",
                         param="prompts")
    perm = np.random.default_rng(seed).permutation(n)
    h = max(1, int(round(HELD_OUT_FRACTION * n)))
    return {"train": sorted(perm[2 * h:].tolist()), "valid": sorted(perm[:h].tolist()),
            "test": sorted(perm[h:2 * h].tolist())}


def processing_order(splits: dict[str, list[int]]) -> list[int]:
    """Text indices ordered so that the splits are interleaved in proportion.

    Text j of a split of size m gets the key (j + 0.5) / m; ties go to train, valid, test.
    After any prefix of this order every split has about its share of finished texts.
    """
    keyed = []
    for rank, name in enumerate(SPLITS):
        idx = splits[name]
        keyed += [((j + 0.5) / len(idx), rank, t) for j, t in enumerate(idx)]
    return [t for _, _, t in sorted(keyed)]


def encode_prompt(tokenizer, prompt: str, where: str, vocab: int | None = None, param: str | None = "prompts"
                  ) -> list[int]:
    """Token ids of a prompt: the chat template (user turn + generation prompt) when the tokenizer
    has one, else plain encoding with the tokenizer's special tokens.

    ``where`` names the prompt in messages (``FILE, line N``), ``param`` the parameter that gave its file.
    Raises: InputError if the prompt encodes to nothing or to an id >= ``vocab`` (the models' logits).
    """
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                             add_generation_prompt=True, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    else:
        ids = tokenizer(prompt)["input_ids"]
    ids = [int(i) for i in ids]
    if not ids:
        raise InputError(f"{where}: the prompt encodes to no tokens", param=param)
    if vocab is not None and max(ids) >= vocab:
        raise InputError(f"{where}: token id {max(ids)} is outside the models' {vocab} logits", param=param)
    return ids
