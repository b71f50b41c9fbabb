"""Generate a trace dataset (train/valid/test splits and metadata.json).

    python generate_data.py [--model vocab|seed] [--out DIR] [--seed N] [--sequences N]
                            [--format parquet|json] [model options]

Logic lives in :mod:`data.synth.generate`; this is the command line. ``cli`` is a
click group: with no subcommand its own options generate a dataset; further
dataset commands are added with ``cli.add_command(...)``.
"""
from evolve.cli.generate import cli

if __name__ == "__main__":
    cli()
