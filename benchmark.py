"""Compare acceptance rules on a trace dataset (thin entry point).

    python benchmark.py [--data DIR] [--split train|valid|test|all] [--champion FILE ...]
                        [--format table|csv|json|markdown] [--output FILE]
    python benchmark.py pareto [--run RUN_DIR ...] [--budgets 0,0.005,0.01,0.02,0.05] ...
    python benchmark.py simulate [--rule NAME | --champion FILE] [--trees] ...
    python benchmark.py perf [--output results/perf.json] ...

Without a subcommand it scores every registered rule and every champion on a split
(:mod:`evolve.commands.compare.table`): the acceptance-quality metrics, their expected values and, on data
with ``draft_index``, tokens per target call, speedup and TV per emitted token. ``pareto``
compares published rule families with evolved fronts at TV budgets (:mod:`evolve.commands.pareto.command`),
``simulate`` runs the decode-loop simulator (:mod:`evolve.commands.simulate`) and ``perf`` measures
the evaluator's speed (:mod:`evolve.perf.command`). The command line lives in
:mod:`evolve.cli.benchmark`; every option is listed in docs/reference/commands.md.
"""
from evolve.cli.benchmark import cli

if __name__ == "__main__":
    cli()
