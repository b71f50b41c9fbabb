"""`python benchmark.py perf`: the speed harness (evaluator, search, harvest, islands, cost files, backend curves)."""
