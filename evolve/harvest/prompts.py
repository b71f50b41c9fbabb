"""Prompts of a harvest: reading the prompts file, encoding a prompt, splitting texts by question.

A prompts file is plain text, one prompt per line (blank lines ignored), or, when its name ends in
``.jsonl`` (any case), Spec-Bench-style JSON Lines (Xia et al. 2024, ACL Findings; repository
hemingkx/Spec-Bench; :func:`read_prompt_file`): one JSON object per non-blank line with ``turns`` (a
non-empty list of user turns, strings), and optionally ``category`` (a non-empty string, on every line
or on none) and ``question_id`` (an integer). The format is chosen by the extension only, so a plain
file whose prompts start with ``{`` reads as before.

Texts: every turn of every question is one text (``seq_id`` = its index, questions in file order and
turns in order; a plain file has one single-turn question per line, so text i is line i's prompt as
before). A later turn is decoded after the question's earlier turns, with their answers in its context
(:func:`encode_prompt` ``history``).

Splits are by question, never within a text or a question (:func:`assign_splits`,
:func:`assign_question_splits`): the questions are shuffled with
``numpy.random.default_rng(seed).permutation(n)``; the first ``max(1, round(0.1 n))`` go to valid, the
next as many to test, the rest to train (at least 3 questions are required, so every split gets one).
When the questions have categories the draw is made within each category (stratified, categories in
sorted order, one generator for all), so every split holds every category. Texts are processed in an
order that interleaves the splits in proportion (:func:`processing_order`), so an interrupted harvest
still has every split; later turns come after all first turns (:func:`turn_passes`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from evolve.errors import InputError, printable
from evolve.traces.io import SPLITS

#: Fraction of the prompts in each of valid and test (at least one prompt each).
HELD_OUT_FRACTION = 0.1
#: Extension (lower case) of a Spec-Bench-style JSON Lines prompts file.
JSONL_SUFFIX = ".jsonl"


@dataclass(frozen=True)
class PromptText:
    """One text of a prompts file: the user turn ``prompt``, the 1-based ``line`` it came from, its 0-based
    ``question`` index, its 1-based ``turn`` within the question, and the question's ``category`` and
    ``question_id`` (None when the file gives none)."""

    prompt: str
    line: int
    question: int
    turn: int = 1
    category: str | None = None
    question_id: int | None = None


@dataclass(frozen=True)
class PromptFile:
    """The texts of a prompts file (:func:`read_prompt_file`) and whether it was JSON Lines (``structured``)."""

    path: str
    texts: tuple[PromptText, ...]
    structured: bool = False

    @property
    def prompts(self) -> list[str]:
        """The user turn of every text, by text index."""
        return [t.prompt for t in self.texts]

    @property
    def lines(self) -> list[int]:
        """The 1-based line of every text, by text index."""
        return [t.line for t in self.texts]

    @property
    def questions(self) -> int:
        """Number of questions."""
        return self.texts[-1].question + 1

    @property
    def categories(self) -> tuple[str, ...]:
        """The categories of the questions, sorted (empty when the file gives none)."""
        return tuple(sorted({t.category for t in self.texts if t.category is not None}))

    def earlier_turns(self, index: int) -> list[int]:
        """Indices of the texts of text ``index``'s question that come before it (its earlier turns, in order)."""
        text = self.texts[index]
        return list(range(index - text.turn + 1, index))

    def where(self, index: int) -> str:
        """Text ``index`` in messages: ``FILE, line N`` (and ``turn T`` for a later turn)."""
        text = self.texts[index]
        return f"{self.path}, line {text.line}" + (f", turn {text.turn}" if text.turn > 1 else "")

    def select(self, categories: Sequence[str] | None) -> "PromptFile":
        """The questions of the given categories only, renumbered (None: all).

        Raises: InputError (parameter ``categories``) for a category the file does not have (listing those it
        has) or a file without categories.
        """
        if categories is None:
            return self
        known = self.categories
        if not known:
            raise InputError(f"{self.path} gives no categories (a .jsonl file with 'category' is needed)",
                             param="categories")
        unknown = [c for c in categories if c not in known]
        if unknown:
            raise InputError(f"unknown category '{printable(unknown[0])}' (the file has: {', '.join(known)})",
                             param="categories")
        kept = [t for t in self.texts if t.category in set(categories)]
        renumber = {q: i for i, q in enumerate(dict.fromkeys(t.question for t in kept))}
        texts = tuple(PromptText(t.prompt, t.line, renumber[t.question], t.turn, t.category, t.question_id)
                      for t in kept)
        return PromptFile(self.path, texts, self.structured)


def _read_text(path: str, param: str = "prompts") -> str:
    """The UTF-8 text of a prompts file. Raises: InputError (parameter ``param``) for a missing, unreadable
    or non-UTF-8 file."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{path}: is a directory, expected a text file", param=param)
    if not p.is_file():
        raise InputError(f"{path}: no such file", param=param)
    try:
        return p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})", param=param) from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})", param=param) from None


def _encodable(text: str) -> bool:
    """Whether ``text`` is UTF-8 text (no lone surrogate, which JSON's ``\\ud800`` escapes can make)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _surrogate(text: str) -> str:
    """The first lone surrogate of ``text`` as an escape (``\\ud800``)."""
    return next(f"\\u{ord(c):04x}" for c in text if 0xD800 <= ord(c) <= 0xDFFF)


def is_jsonl(path: str) -> bool:
    """Whether ``path`` is read as Spec-Bench-style JSON Lines: its name ends in ``.jsonl`` (any case)."""
    return str(path).lower().endswith(JSONL_SUFFIX)


class _RepeatedKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _no_repeated_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object's pairs as a dict; a key given twice (``{"question_id": 1, "question_id": 2}``, which
    ``json.loads`` would silently read as its last value) raises :class:`_RepeatedKey`."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


def read_prompt_file(path: str, param: str = "prompts") -> PromptFile:
    """Read a prompts file, plain text or (``.jsonl``) Spec-Bench-style JSON Lines (module doc).

    Returns a :class:`PromptFile`: one text per turn of each question. Raises: InputError (parameter
    ``param``, the option that named the file) for a missing, unreadable or non-UTF-8 file, one without prompts, and
    (JSON Lines) a line that is not a JSON object, lacks ``turns``, has turns that are not a non-empty list of
    non-empty strings, a string holding a lone surrogate (a ``\\ud800`` escape no tokenizer can encode), a ``category`` that is not a non-empty string or is missing while other lines give one, a
    ``question_id`` that is not an integer or repeats, a key given twice in one object, or JSON nested too deeply;
    each in one line naming the file, the line and the key. Lines end at ``\n`` only (JSON Lines), so a string
    holding U+2028 stays on its line.
    """
    if not is_jsonl(path):
        prompts, lines = read_prompts(path, param)
        return PromptFile(str(path), tuple(PromptText(p, ln, i) for i, (p, ln) in enumerate(zip(prompts, lines))))
    text = _read_text(path, param)
    texts: list[PromptText] = []
    seen_ids: dict[int, int] = {}
    with_category: int | None = None
    without_category: int | None = None
    question = 0
    for i, line in enumerate(text.split("\n"), start=1):  # JSON Lines ends a line at \n only (not at U+2028)
        if not line.strip():
            continue

        def bad(what: str, key: str | None = None) -> InputError:
            return InputError(f"{path}, line {i}: {f'key {printable(key)!r}: ' if key else ''}{what}",
                              param=param)

        try:
            obj = json.loads(line, object_pairs_hook=_no_repeated_keys)
        except _RepeatedKey as exc:
            raise bad("appears twice in the object (JSON keeps only the last)", exc.key) from None
        except RecursionError:
            raise bad("not valid JSON (nested too deeply)") from None
        except ValueError as exc:
            raise bad(f"not valid JSON ({str(exc).split(':')[0]})") from None
        if not isinstance(obj, dict):
            raise bad(f"expected a JSON object, found {type(obj).__name__}")
        if "turns" not in obj:
            raise bad("missing (a list of user turns is required)", "turns")
        turns = obj["turns"]
        if not isinstance(turns, list) or not turns:
            raise bad("expected a non-empty list of strings", "turns")
        for k, turn in enumerate(turns):
            if not isinstance(turn, str) or not turn.strip():
                raise bad(f"turn {k + 1} is not a non-empty string", "turns")
            if not _encodable(turn):
                raise bad(f"turn {k + 1} holds a lone surrogate ({_surrogate(turn)}), which is no character of "
                          f"UTF-8 text", "turns")
        category = obj.get("category")
        if "category" in obj and (not isinstance(category, str) or not category.strip()):
            raise bad("expected a non-empty string", "category")
        if isinstance(category, str) and not _encodable(category):
            raise bad(f"holds a lone surrogate ({_surrogate(category)}), which is no character of UTF-8 text",
                      "category")
        if category is None:
            without_category = without_category or i
        else:
            with_category = with_category or i
        if with_category and without_category:
            raise bad(f"missing while line {with_category} gives one (give a category on every line or on none)"
                      if category is None else f"given while line {without_category} gives none (give a "
                      f"category on every line or on none)", "category")
        qid = obj.get("question_id")
        if "question_id" in obj:
            if not isinstance(qid, int) or isinstance(qid, bool):
                raise bad(f"expected an integer, found {json.dumps(qid)[:30]}", "question_id")
            if not -2 ** 63 <= qid < 2 ** 63:
                raise bad("integer outside the 64-bit range", "question_id")
            if qid in seen_ids:
                raise bad(f"{qid} repeats line {seen_ids[qid]}", "question_id")
            seen_ids[qid] = i
        texts += [PromptText(turn, i, question, k + 1, category, qid) for k, turn in enumerate(turns)]
        question += 1
    if not texts:
        raise InputError(f"{path}: no questions (one JSON object per non-blank line)", param=param)
    return PromptFile(str(path), tuple(texts), structured=True)


def read_prompts(path: str, param: str = "prompts") -> tuple[list[str], list[int]]:
    """Read a plain prompts file: one prompt per line, blank lines ignored (a ``.jsonl`` file: the first turn
    of every question, :func:`read_prompt_file`).

    Returns (prompts, 1-based line numbers). Raises: InputError (parameter ``param``, the option that named the
    file) for a missing, unreadable or non-UTF-8 file, or one without prompts.
    """
    if is_jsonl(path):
        first = [t for t in read_prompt_file(path, param).texts if t.turn == 1]
        return [t.prompt for t in first], [t.line for t in first]
    text = _read_text(path, param)
    prompts, lines = [], []
    for i, line in enumerate(text.splitlines(), start=1):
        line = line.strip("\r\n")
        if line.strip():
            prompts.append(line)
            lines.append(i)
    if not prompts:
        raise InputError(f"{path}: no prompts (one prompt per non-blank line)", param=param)
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


def split_order(splits: dict[str, list[int]]) -> list[int]:
    """Text indices split after split (train, valid, test), each split's in increasing order: the order of a harvest
    whose drafter shares a cache across texts (:attr:`evolve.engine.drafter_base.Drafter.cross_request`), so that a
    text's drafts see the responses of earlier splits' texts and of its own split's earlier texts, never of a later
    split's."""
    return [t for name in SPLITS for t in sorted(splits[name])]


def assign_question_splits(prompts: PromptFile, seed: int) -> dict[str, list[int]]:
    """Split the texts of ``prompts`` by question: {split: sorted text indices}.

    Without categories: :func:`assign_splits` over the questions (for a plain file, whose questions are its
    texts, exactly :func:`assign_splits` of the texts). With categories: stratified, one generator
    ``numpy.random.default_rng(seed)`` drawing ``rng.permutation(n_c)`` for each category c in sorted order
    and splitting it as :func:`assign_splits` does, so every split holds every category. Every turn of a
    question goes to the question's split.
    Raises: InputError (parameter ``prompts``) for fewer than 3 questions, or fewer than 3 in a category.
    """
    n = prompts.questions
    categories = prompts.categories
    if not categories:
        by_question = assign_splits(n, seed)
    else:
        category_of = {t.question: t.category for t in prompts.texts}
        rng = np.random.default_rng(seed)
        by_question = {name: [] for name in SPLITS}
        for category in categories:
            members = [q for q in range(n) if category_of[q] == category]
            if len(members) < 3:
                raise InputError(f"category '{printable(category)}' has {len(members)} question(s); at least 3 "
                                 f"are needed, one per split (train, valid, test); a selection of categories can leave it out",
                                 param="prompts")
            perm = rng.permutation(len(members))
            h = max(1, int(round(HELD_OUT_FRACTION * len(members))))
            for name, part in (("valid", perm[:h]), ("test", perm[h:2 * h]), ("train", perm[2 * h:])):
                by_question[name] += [members[k] for k in part.tolist()]
    split_of = {q: name for name, qs in by_question.items() for q in qs}
    out: dict[str, list[int]] = {name: [] for name in SPLITS}
    for t, text in enumerate(prompts.texts):
        out[split_of[text.question]].append(t)
    return {name: out[name] for name in ("train", "valid", "test")}


def split_rule(prompts: PromptFile) -> str:
    """The split rule of :func:`assign_question_splits` for ``prompts``, in words (a dataset's metadata)."""
    rule = (f"rng = numpy.random.default_rng(seed); perm = rng.permutation(n); h = max(1, round({HELD_OUT_FRACTION} "
            f"n)); valid = perm[:h], test = perm[h:2h], train = perm[2h:]")
    if prompts.categories:
        return f"by question, within each category in sorted order (one rng for all): {rule}"
    return rule if not prompts.structured else f"by question: {rule}"


def turn_passes(prompts: PromptFile, order: Sequence[int]) -> list[list[int]]:
    """``order`` cut into passes by turn: every first turn (in ``order``), then every second turn, ...
    A plain file gives one pass, ``order`` itself."""
    turns = max(t.turn for t in prompts.texts)
    return [[t for t in order if prompts.texts[t].turn == k] for k in range(1, turns + 1)]


def check_context(ids: Sequence[int], where: str, room: int | None, context: int | None,
                  param: str | None = "prompts") -> None:
    """Refuse a prompt that does not fit the target's context: ``ids`` (its token ids, with its question's earlier
    turns and answers) longer than ``room``, the positions the context of ``context`` tokens leaves it after the
    tokens generated and a block of drafts (None: no limit known). Raises InputError naming ``where`` (``FILE,
    line N``), its length and the room."""
    if room is not None and len(ids) > room:
        raise InputError(f"{where}: the prompt is {len(ids)} tokens (with its question's earlier turns and answers), "
                         f"more than the {max(room, 0)} the target's context of {context} tokens leaves it beside "
                         f"the tokens to generate (and one call's drafts); shorten it, generate fewer tokens or leave "
                         f"its question out", param=param)


def encode_prompt(tokenizer, prompt: str, where: str, vocab: int | None = None, param: str | None = "prompts",
                  history: Sequence[tuple[str, str]] = ()) -> list[int]:
    """Token ids of a prompt: the chat template (user turn + generation prompt) when the tokenizer
    has one, else plain encoding with the tokenizer's special tokens.

    ``history``: the question's earlier (user turn, model answer) pairs, put before the prompt as user and
    assistant messages of the chat template (as Spec-Bench decodes multi-turn questions); without a template
    the turns and answers are joined by blank lines. ``where`` names the prompt in messages (``FILE, line N``),
    ``param`` the parameter that gave its file.
    Raises: InputError if the prompt or a turn of ``history`` holds a lone surrogate (no UTF-8 text: a tokenizer
    cannot encode it), or the prompt encodes to nothing or to an id >= ``vocab`` (the models' logits).
    """
    bad = next((t for t in (prompt, *(s for pair in history for s in pair)) if not _encodable(t)), None)
    if bad is not None:
        raise InputError(f"{where}: the prompt holds a lone surrogate ({_surrogate(bad)}), which is no character of "
                         f"UTF-8 text", param=param)
    if getattr(tokenizer, "chat_template", None):
        messages = [m for user, answer in history for m in ({"role": "user", "content": user},
                                                             {"role": "assistant", "content": answer})]
        text = tokenizer.apply_chat_template(messages + [{"role": "user", "content": prompt}],
                                             add_generation_prompt=True, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    elif history:
        ids = tokenizer("\n\n".join([*(s for pair in history for s in pair), prompt]))["input_ids"]
    else:
        ids = tokenizer(prompt)["input_ids"]
    ids = [int(i) for i in ids]
    if not ids:
        raise InputError(f"{where}: the prompt encodes to no tokens", param=param)
    if vocab is not None and max(ids) >= vocab:
        raise InputError(f"{where}: token id {max(ids)} is outside the models' {vocab} logits", param=param)
    return ids
