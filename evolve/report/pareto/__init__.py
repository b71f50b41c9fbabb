"""`python benchmark.py pareto`: published rule families against evolved fronts, the oracle bound, the references and the relaxed fronts."""
