"""Spec-Bench's task groups: which question categories each of its leaderboard's columns covers (data only).

Spec-Bench (Xia et al. 2024, "Unlocking Efficiency in Large Language Model Inference: A Comprehensive Survey of
Speculative Decoding", ACL Findings; repository hemingkx/Spec-Bench) reports speedup and mean accepted tokens per
task group: multi-turn conversation (MT-bench's eight categories), translation, summarization, question
answering, mathematical reasoning and retrieval-augmented generation, and overall. :data:`TASK_GROUPS` holds
them in the leaderboard's order; a category of no group (a prompts file of other categories) is a group of its
own (:func:`groups_of`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class TaskGroup:
    """One column of Spec-Bench's leaderboard: its ``name``, a short ``label`` for table headers and the question
    ``categories`` it covers."""

    name: str
    label: str
    categories: tuple[str, ...]


#: Spec-Bench's six task groups, in the leaderboard's order.
TASK_GROUPS: tuple[TaskGroup, ...] = (
    TaskGroup("multi-turn conversation", "Multi-turn",
              ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")),
    TaskGroup("translation", "Translation", ("translation",)),
    TaskGroup("summarization", "Summarization", ("summarization",)),
    TaskGroup("question answering", "QA", ("qa",)),
    TaskGroup("mathematical reasoning", "Math reasoning", ("math_reasoning",)),
    TaskGroup("retrieval-augmented generation", "RAG", ("rag",)),
)
#: Spec-Bench's 13 categories, in the order of its question file.
CATEGORIES: tuple[str, ...] = tuple(c for g in TASK_GROUPS for c in g.categories)


def groups_of(categories: Iterable[str]) -> list[TaskGroup]:
    """The task groups holding any of ``categories``, in :data:`TASK_GROUPS` order, then one group per category of
    no Spec-Bench group (sorted, labelled by its name) holding the categories present only."""
    present = set(categories)
    groups = [TaskGroup(g.name, g.label, tuple(c for c in g.categories if c in present))
              for g in TASK_GROUPS if present & set(g.categories)]
    return groups + [TaskGroup(c, c, (c,)) for c in sorted(present - set(CATEGORIES))]


def category_order(categories: Iterable[str]) -> list[str]:
    """``categories`` in Spec-Bench's order (:data:`CATEGORIES`), the others after them sorted."""
    present = set(categories)
    return [c for c in CATEGORIES if c in present] + sorted(present - set(CATEGORIES))


__all__ = ["TaskGroup", "TASK_GROUPS", "CATEGORIES", "groups_of", "category_order"]
