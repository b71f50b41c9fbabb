"""The draft-model targets of ``python -m evolve export --to NAME`` by name (:data:`DRAFT_MODELS`): a verification-
length policy written as a module that drafts inside an engine's own speculative loop, one line per target.

Each is a module defining ``NAME`` (the ``--to`` value), ``COST_ENGINE`` (the engine whose loop runs the module, whose
cost files price it and whose ``benchmark.py live`` peer decodes it), ``ENGINE`` (its
:class:`evolve.export.engines.base.Engine`: the step columns a search targeting it may read), ``champion_module(spec,
champions directory) -> (rule, module text)``, ``policy_module(rule, source, notes)`` (a setting priced in the
champion's place, :mod:`evolve.export.engines.priced`), ``module_source(rule, provenance, ngram, gamma, notes,
suffix)``, ``check_policy(rule, family)`` and ``drafter_of(source, data)`` (the drafter family the module drafts
with). The export command, ``run --target-engine`` and live decoding's peers read this one table.
"""
from __future__ import annotations

from evolve.export.engines import llama_cpp_python, transformers_generate

#: Draft-model target name -> its module.
DRAFT_MODELS = {m.NAME: m for m in (llama_cpp_python, transformers_generate)}

__all__ = ["DRAFT_MODELS"]
