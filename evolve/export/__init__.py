"""Export acceptance rules to inference engines as standalone Python modules.

``python -m evolve export CHAMPION --to numpy|torch`` (:mod:`evolve.cli.export`) writes a
module that imports nothing but ``math`` and numpy (:mod:`evolve.export.numpy_module`) or
torch (:mod:`evolve.export.torch_module`) and defines a batched
``acceptance_threshold(**columns)``: the rule's threshold for every element of the given
feature arrays, with the evaluator's exact semantics (protected operators, NaN or
infinite thresholds -> 0, then clamped to [0, 1]). A relaxation champion (:mod:`evolve.kinds.registry`)
exports ``relaxation_weight(**columns)`` and ``relaxed_target(target_probs, draft_probs, w)`` instead,
for block verification against (1 - w) p + w q (Sun et al. 2024, arXiv 2403.10444).
:mod:`evolve.export.codegen` turns an expression into the straight-line code both targets print
and holds the one module template (shared operators; a per-backend row in each target module, a
per-kind layout); :mod:`evolve.export.exporter` resolves a champion file or rule name and picks the
target and the layout. The layout follows PySR's export modules (one module per target).
:mod:`evolve.export.engines` writes a champion instead as the configuration an inference engine reads (vLLM,
SGLang, TensorRT-LLM, llama.cpp, transformers), exactly or as the engine's nearest setting tuned on data.
"""
