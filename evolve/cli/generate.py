"""``python generate_data.py``: write a synthetic trace dataset; ``harvest`` records one from real models.

:data:`cli` is a click group. Without a subcommand its own options generate a dataset with
:func:`evolve.traces.synth.generate.generate_dataset` and write it with :func:`evolve.traces.synth.generate.write`
(train, valid and test splits plus ``metadata.json``, see docs/reference/schema.md), after printing the
per-split statistics. With ``--chunk-sequences N`` the splits are generated and written N sequences
at a time instead (:func:`evolve.traces.synth.chunked.generate_chunked`: one Parquet row group per chunk,
memory bounded by one chunk; another draw than the unchunked dataset of the same seed), and the
statistics are printed at the end. Every knob of every trace model is offered as an option
(:func:`evolve.traces.synth.generate.model_options`); giving one the chosen model lacks is an error. The
``harvest`` subcommand is :data:`evolve.cli.harvest.harvest`. Bad input exits with code 2 and one
line naming the option (:mod:`evolve.cli.errors`).
"""
from __future__ import annotations

import click

from evolve.cli.bounds import MAX_SEQUENCES
from evolve.traces.io import FORMATS
from evolve.errors import InputError
from evolve.traces.synth import chunked, generate
from evolve.cli.errors import CliGroup
from evolve.cli.inventory import OutputPath
from evolve.cli.harvest import harvest
from evolve.cli.subset import subset


def _model_options(fn):
    for opt in reversed(generate.model_options()):
        kind = click.IntRange(max=opt.high) if opt.type is int else opt.type  # the model checks the lower bound
        fn = click.option(opt.flag, opt.field, type=kind, default=None, help=opt.help)(fn)
    return fn


@click.group(cls=CliGroup, invoke_without_command=True, context_settings={"max_content_width": 100})
@click.option("--model", type=click.Choice(list(generate.MODELS)), default=generate.DEFAULT_MODEL,
              show_default=True, help="trace model: vocab (whole distributions, consistent columns) "
                                      "or independent (each feature drawn on its own, no optional columns)")
@click.option("--out", default="data", show_default=True, type=OutputPath(file_okay=False),
              help="dataset directory to write")
@click.option("--seed", type=click.IntRange(0, 2 ** 64 - 1), default=generate.DEFAULT_SEED, show_default=True,
              help="master seed; the splits use seeds derived from it")
@click.option("--sequences", type=click.IntRange(1, MAX_SEQUENCES), default=generate.DEFAULT_SEQUENCES, show_default=True,
              help="train sequences; valid and test get max(1, round(0.3 * N)) each")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="parquet", show_default=True,
              help="split file format (json = an array of records, one object per row)")
@click.option("--chunk-sequences", type=click.IntRange(1, MAX_SEQUENCES), default=None, metavar="N",
              help="generate and write each split N sequences at a time (one Parquet row group each), so memory "
                   "holds one chunk whatever --sequences; chunk c draws from a seed derived from the split's seed "
                   "and c, so the dataset differs from the unchunked one of the same seed [default: no chunks]")
@_model_options
@click.pass_context
def cli(ctx: click.Context, model: str, out: str, seed: int, sequences: int, fmt: str, chunk_sequences: int | None,
        **knobs) -> None:
    """Generate a trace dataset; with a subcommand, run that instead.

    Model options apply to the model named in their help; giving one that the
    chosen model lacks is an error.
    """
    if ctx.invoked_subcommand is not None:
        return
    config = generate.build_config(model, knobs)
    generate.split_sizes(sequences)
    generate.split_seeds(seed)
    generate.check_output_dir(out)
    if chunk_sequences is not None:
        chunked.chunk_sizes(sequences, chunk_sequences)
        if fmt != "parquet":
            raise InputError(f"option '--chunk-sequences': needs --format parquet (value --format {fmt})")
        paths, metadata = chunked.generate_chunked(out, model, seed, sequences, chunk_sequences, config=config,
                                                   progress=lambda msg: click.echo(f"generate: {msg}", err=True))
        click.echo(f"model {model} (version {metadata['generator_version']}), seed {seed}, "
                   f"chunks of {chunk_sequences} sequences")
        click.echo(generate.format_stats(metadata["statistics"]))
        click.echo(_wrote(paths))
        return
    dataset = generate.generate_dataset(model, seed, sequences, config=config)
    click.echo(f"model {model} (version {dataset.metadata['generator_version']}), seed {seed}")
    click.echo(generate.format_stats(dataset.metadata["statistics"]))
    paths = generate.write(dataset, out, fmt)
    click.echo(_wrote(paths))


def _wrote(paths) -> str:
    """``wrote PATH, PATH, ...`` wrapped to 100 columns (a path longer than that stays whole on its line)."""
    import textwrap

    return "\n".join(textwrap.wrap(f"wrote {', '.join(str(p) for p in paths)}", 100, subsequent_indent="  ",
                                   break_long_words=False, break_on_hyphens=False))


cli.add_command(harvest)
cli.add_command(subset)
