"""Write a trace dataset: train, valid and test splits plus metadata.json (thin entry point).

    python generate_data.py [--model vocab|independent] [--out DIR] [--seed N] [--sequences N]
                            [--format parquet|json] [model options]
    python generate_data.py harvest --target PATH (--draft PATH | --draft-skip-layers LIST |
                                    --draft-window SINK,RECENT) --prompts FILE [options]

Without a subcommand it generates a synthetic dataset (:mod:`evolve.traces.synth.generate`); ``harvest``
records traces from local language models (:mod:`evolve.harvest.loop`). The command line lives in
:mod:`evolve.cli.generate`; every option is listed in docs/reference/commands-data.md and the files it writes in
docs/reference/schema.md.
"""
from evolve.cli.generate import cli

if __name__ == "__main__":
    cli()
