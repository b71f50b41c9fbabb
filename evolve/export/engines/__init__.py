"""Engine targets of ``python -m evolve export CHAMPION --to ENGINE``: the file an inference engine reads (a YAML
config, server flags, generate() arguments) that runs a champion, or the engine's nearest setting.

The interface, so that a new engine is one module and one registry line:

* a module ``evolve/export/engines/<engine>.py`` defines ``ENGINE``, an :class:`evolve.export.engines.base.Engine`:
  its ``name`` (the ``--to`` value), ``title``, how the engine ``reads`` the file, its documented ``knobs``
  (:class:`evolve.export.engines.base.Knob`: name, type, range, default, the engine source file that defines it;
  the tables of docs/tutorial/deploy.md are generated from them), ``kinds`` (a
  :class:`evolve.kinds.base.ProgramKind` -> :class:`evolve.export.engines.base.KindSupport`: which champions it
  writes exactly, the settings it can express as rules of that kind, its default, the nearest setting family),
  ``render`` (a :class:`evolve.export.engines.base.Setting` and the champion's
  :class:`evolve.export.engines.base.Provenance`, and an optional per-batch-size schedule, -> the text written),
  ``schedule`` (whether ``render`` takes one) and ``refusals`` (the nearest setting of a kind it cannot run);
  :mod:`evolve.export.engines.supports` builds the usual ``KindSupport`` entries from a function that turns a
  setting's numbers into knobs;
* one line in :data:`evolve.export.engines.registry.BUILTIN` (or :func:`evolve.export.engines.registry.register_engine`
  at run time).

:mod:`evolve.export.engines.deploy` writes a champion for an engine (exactly, or tuned on a dataset's valid split
with the kind's own scorer under a cost file, with the gap on the test split); the engines are
:mod:`evolve.export.engines.vllm`, :mod:`evolve.export.engines.sglang`, :mod:`evolve.export.engines.tensorrt_llm`,
:mod:`evolve.export.engines.llama_cpp` and :mod:`evolve.export.engines.transformers`.
"""
