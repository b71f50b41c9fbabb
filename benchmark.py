"""Compare acceptance rules on a trace dataset: seed 004's benchmark table (thin CLI).

    python benchmark.py [--data DIR] [--split train|valid|test|all] [--champion FILE ...]
                        [--format table|csv|json|markdown] [--output FILE]

scores every baseline and every champion (``heuristics/champions/*.json`` and
the files given) and prints Heuristic, Accept%, Accuracy, Quality, Fitness and
Time, the expected metrics and each champion's change against
standard_rejection. The logic lives in :mod:`evolve.report.compare`.

Subcommands: ``python benchmark.py simulate ...`` (decode-loop simulator and
draft trees, :mod:`evolve.report.simulate`) and ``python benchmark.py perf ...``
(evaluator speed against DEAP and Operon, :mod:`evolve.report.perf`) and ``python benchmark.py pareto ...``
(published rule families against evolved fronts: tokens per call at TV budgets, :mod:`evolve.report.pareto`).
"""
from evolve.cli.benchmark import cli

if __name__ == "__main__":
    cli()
