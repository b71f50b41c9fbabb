"""``python benchmark.py pareto``: published rule families against evolved fronts, the oracle bound, the learned
curve, the references and the relaxed fronts; :mod:`evolve.report.pareto` renders the result."""
