"""Engine targets of ``python -m evolve export CHAMPION --to ENGINE``: the file an inference engine reads (a YAML
config, server flags, assistant settings) that runs a champion, or the engine's nearest setting, each checked against
the engine's own code at a named version.

The interface, so that a new engine is one module and one registry line, and a kind needs no edit here:

* a module ``evolve/export/engines/<engine>.py`` defines ``ENGINE``, an :class:`evolve.export.engines.base.Engine`:
  its ``name`` (the ``--to`` value), ``title``, how the engine ``reads`` the file, its documented ``knobs``
  (:class:`evolve.export.engines.base.Knob`: name, type, range, default, the engine source file that defines it;
  the tables of docs/tutorial/deploy.md are generated from them), its ``capabilities``
  (:class:`evolve.export.engines.base.Capabilities`, plain data: a draft-length knob, block verification, a confidence
  stop, chains, static trees, per-level top-k, schedules, acceptance families, its lossless default, its defaults),
  ``render`` (a :class:`evolve.export.engines.base.Setting` and the champion's
  :class:`evolve.export.engines.base.Provenance`, with the harvest's drafter, and an optional per-batch-size
  schedule, -> the text written), the ``version`` it was checked against and how (``checked``), and how it reads a
  schedule (``schedule_length``);
* one line in :data:`evolve.export.engines.registry.BUILTIN` (or :func:`evolve.export.engines.registry.register_engine`
  at run time); a newly checked version is another ``Engine`` of the same name.

What an engine can do with a kind of program is the kind's answer: its ``engines`` hook
(:class:`evolve.kinds.base.KindHooks`, in ``evolve/kinds/<kind>/export_engines.py``) maps its programs onto the
engine's capabilities with the builders of :mod:`evolve.export.engines.supports`
(:meth:`evolve.export.engines.base.Engine.support`). :mod:`evolve.export.engines.deploy` writes a champion for an
engine (exactly, or tuned on a dataset's valid split with the kind's own scorer under a cost file, with the gap on the
test split); the engines are :mod:`evolve.export.engines.vllm`, :mod:`evolve.export.engines.sglang`,
:mod:`evolve.export.engines.tensorrt_llm`, :mod:`evolve.export.engines.llama_cpp` and
:mod:`evolve.export.engines.transformers`; :mod:`evolve.export.engines.llama_cpp_python` writes a policy as a draft
model module instead (drafting by prompt lookup, or by suffix decoding:
:mod:`evolve.export.engines.llama_cpp_python_suffix`), and :mod:`evolve.export.engines.transformers_generate` the same
drafters as a candidate generator for transformers' own assisted-generation loop.
"""
