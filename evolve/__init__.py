"""The search: primitive set, GP compiler, Numba evaluator and the evolution loop."""
