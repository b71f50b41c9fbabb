"""The evaluator's fast path: programs lowered to register code (``lowering``, record ``layouts``), the fused
Numba kernels that run them over a split (``kernels``), how the work is cut and handed to threads
(``scheduler``) and the calls that score a population, one program or given thresholds (``scoring``).
:mod:`evolve.eval.reference` is the slow, simple interpreter the tests hold it to."""
