"""``python generate_data.py subset``: the dataset of some question categories of a harvest
(:mod:`evolve.harvest.subset`), e.g. one of Spec-Bench's task groups, for a search of its own."""
from __future__ import annotations

import click

from evolve.cli.errors import CliCommand
from evolve.cli.inventory import OutputPath
from evolve.cli.types import CommaList
from evolve.traces.synth.generate import format_stats


@click.command("subset", cls=CliCommand, inputs=("data",))
@click.option("--data", required=True, metavar="DIR", help="A harvested dataset whose prompts had categories.")
@click.option("--categories", required=True, type=CommaList(unique_sorted=True), metavar="NAME,...",
              help="The categories to keep (e.g. summarization, or the eight MT-bench categories).")
@click.option("--out", required=True, metavar="DIR", type=OutputPath(file_okay=False),
              help="Output directory of the subset.")
def subset(data: str, categories: list[str], out: str) -> None:
    """Write the records, tree rows and texts of some categories of a harvest as a dataset of their own."""
    from evolve.harvest.subset import subset_dataset

    stats = subset_dataset(data, categories, out)
    click.echo(f"categories {', '.join(categories)} of {data}")
    click.echo(format_stats(stats))
    click.echo(f"wrote {out}")
