"""Multi-turn questions decoded turn by turn, as Spec-Bench decodes MT-bench: a later turn's prompt holds the
question's earlier turns with the same decoder's own answers to them (:class:`TurnContexts`), and a later turn is
decoded after its earlier ones (:func:`with_earlier_turns`)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from evolve.harvest.prompts import PromptFile, encode_prompt


def with_earlier_turns(prompts: PromptFile, texts: Sequence[int]) -> list[int]:
    """``texts`` (text indices) with the earlier turns of their questions added, in increasing order (a later
    turn is decoded after its question's earlier turns, with their answers)."""
    return sorted({e for t in texts for e in (*prompts.earlier_turns(t), t)})


class TurnContexts:
    """The prompt ids of each text for each decoder, a later turn's with that decoder's own answers to its
    question's earlier turns (as Spec-Bench decodes multi-turn questions; the chat history of
    :func:`evolve.harvest.prompts.encode_prompt`). Decoders are keys: -1 plain decoding, r the r-th rule,
    None the warm-up (first turns only)."""

    def __init__(self, prompts: PromptFile, tokenizer, vocab: int):
        self.prompts, self.tokenizer, self.vocab = prompts, tokenizer, vocab
        self.first: dict[int, list[int]] = {}
        self.answers: dict[tuple[int, int | None], str] = {}

    def answered(self, index: int, decoder: int, tokens: Sequence[int]) -> None:
        """Keep ``decoder``'s answer (generated ids) to text ``index`` when a later turn of its question needs it."""
        text = self.prompts.texts[index]
        if index + 1 < len(self.prompts.texts) and self.prompts.texts[index + 1].question == text.question:
            self.answers[index, decoder] = self.tokenizer.decode(list(tokens), skip_special_tokens=True).strip()

    def runner(self, decoder: int, decode: Callable[[list[int], int], tuple[list[int], Any]]
               ) -> Callable[[int], tuple[list[int], Any]]:
        """``run(index)``: ``decode(prompt ids, index)`` of text ``index`` with ``decoder``'s own earlier answers, and
        its answer kept for the question's later turns (:meth:`answered`)."""
        def run(index: int) -> tuple[list[int], Any]:
            tokens, counts = decode(self(index, decoder), index)
            self.answered(index, decoder, tokens)
            return tokens, counts
        return run

    def __call__(self, index: int, decoder: int | None) -> list[int]:
        """The prompt ids of text ``index`` for ``decoder``. Raises: InputError as
        :func:`evolve.harvest.prompts.encode_prompt`."""
        earlier = self.prompts.earlier_turns(index)
        if not earlier:
            if index not in self.first:
                self.first[index] = encode_prompt(self.tokenizer, self.prompts.texts[index].prompt,
                                                  self.prompts.where(index), self.vocab)
            return self.first[index]
        history = [(self.prompts.texts[e].prompt, self.answers[e, decoder]) for e in earlier]
        return encode_prompt(self.tokenizer, self.prompts.texts[index].prompt, self.prompts.where(index), self.vocab,
                             history=history)


__all__ = ["TurnContexts", "with_earlier_turns"]
