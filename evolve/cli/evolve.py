"""``python -m evolve``: evolve acceptance rules, show a run's champion, promote it.

Commands (run ``python -m evolve COMMAND --help`` for every option):

* ``run``: evolve on the train split of ``--data`` (default ``data/``), pick the
  champion on valid, write a run directory under ``--out`` (default
  ``results/``) and print its path on stdout (alone: the champion, where it comes
  from and its scores are reported on stderr, with the progress bar);
* ``resume RUN_DIR``: continue a run that was stopped (``kill -9``, a lost
  node, Ctrl-C) from its last checkpoint;
* ``show RUN_DIR``: the champion (simplified with sympy) and its metrics;
* ``promote RUN_DIR NAME``: copy the champion into ``heuristics/champions/``
  (or ``--champions-dir`` / ``$SPECDEC_CHAMPIONS_DIR``) as ``NAME.json`` + ``NAME.py``;
* ``train-drafter``: train an EAGLE-3-style draft head for a local target (:mod:`evolve.cli.train_drafter`).

Bad input gives one line ``error: ...`` and exit code 2 (:mod:`evolve.errors`).
"""
from __future__ import annotations

import os
import textwrap

import click

from evolve.cli.bounds import MAX_THREADS
from evolve.cli.errors import EXIT_INTERRUPTED, CliGroup
from evolve.cli.export import export
from evolve.cli.train_drafter import train_drafter
from evolve.cli.inventory import OutputPath
from evolve.cli.output import ProgressLines, stderr_is_terminal
from evolve.cli.types import CommaList, LiveChoice, legacy_option
from evolve.errors import printable, counted
from evolve.search.config import DEFAULTS

#: Expressions larger than this are shown without sympy (building nested Piecewise terms alone
#: can take hours: sympy folds and simplifies their conditions as it builds them).
SIMPLIFY_MAX_NODES = 80
#: Wall-time limit of the sympy simplification in ``show``, seconds.
SYMPY_SECONDS = 20


def _with_time_limit(fn, seconds: int):
    """``fn()``, or None if it raises an arithmetic/sympy error or runs longer than ``seconds``.

    The limit uses SIGALRM, so it applies only in the main thread on Unix; elsewhere ``fn`` runs
    without a limit (exceptions are still caught).
    """
    import signal
    import threading

    class _Timeout(Exception):
        pass

    def alarm(signum, frame):
        raise _Timeout

    use_alarm = hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGALRM, alarm) if use_alarm else None
    if use_alarm:
        signal.alarm(seconds)
    try:
        return fn()
    except (_Timeout, ValueError, TypeError, ZeroDivisionError, RecursionError, AttributeError):
        return None
    finally:
        if use_alarm:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)


@click.group(cls=CliGroup)
def cli() -> None:
    """Evolve acceptance heuristics for speculative decoding (DEAP genetic programming)."""


def _kind_settings() -> tuple[str, ...]:
    """Every registered kind's own settings (:func:`evolve.search.config.kind_setting_fields`), in kind order."""
    from evolve.search.config import kind_setting_fields
    return tuple(kind_setting_fields())


#: Settings given as options of ``run``, in help order (the others are set in a --config file): RunConfig fields,
#: then every kind's own settings.
RUN_OPTIONS: tuple[str, ...] = (
    "data", "out", "population", "generations", "seed", "objective", "evolve", "gamma", "tv_budget", "tv_cap", "costs",
    "concurrency", *_kind_settings(),
    "features", "crossover_prob", "mutation_prob", "tournament_size", "parsimony_size", "elitism", "hall_of_fame",
    "max_depth", "islands", "migration_interval", "migrants", "selection", "cv_folds")


def _reads_file(name: str) -> bool:
    from evolve.search.config import kind_setting_fields
    found = kind_setting_fields().get(name)
    return found is not None and bool(found.metadata["reads_file"])


#: Settings that name what ``run`` reads: a path, or a name (a registered rule, ``default``) that is not
#: an input; a path given is part of the input inventory (:mod:`evolve.cli.inventory`). A kind's setting is one when
#: it may name a file (its ``reads_file``).
RUN_INPUTS: tuple[str, ...] = ("data", "costs", *(n for n in _kind_settings() if _reads_file(n)))
#: RunConfig fields that name where ``run`` writes.
RUN_OUTPUTS: tuple[str, ...] = ("out",)
#: Extra help of some options (the field's help comes from :class:`evolve.search.config.RunConfig`).
RUN_OPTION_NOTES: dict[str, str] = {
    "objective": "acceptance_quality (acceptance rate times quality score; half the quality score below the "
                 "quality floor 0.95), expected (its noise-free expected form), speed_at_tv (tokens per target "
                 "call with TV per token <= --tv-budget), pareto (NSGA-II over tokens per call, TV per token and "
                 "size; writes front.json), tokens_per_second (verify-length policies and tree shapes: tokens per "
                 "second under --costs, within --tv-budget when --verify-with is lossy), pareto_tokens_per_second (NSGA-II over "
                 "tokens per second within --tv-cap, TV per token and size).",
    "features": "Comma-separated.",
}


def _kinds_note() -> str:
    """One sentence per registered kind for ``--evolve``'s help: what a value is, the objectives that score it and
    the dataset columns it needs (read from each :class:`evolve.kinds.base.ProgramKind`)."""
    from evolve.kinds.registry import KINDS

    parts = []
    for k in KINDS.values():
        needs = [f"{', '.join(k.columns)} in the data"] if k.columns else []
        needs = f"; needs {' and '.join(needs + ([k.needs] if k.needs else []))}" if needs or k.needs else ""
        parts.append(f"{k.name}: {k.title}, scored by {' or '.join(k.objectives)}{needs}.")
    return " ".join(parts)


def _setting_options(fn):
    """Decorate ``run`` with one option per field of :data:`RUN_OPTIONS`, typed and documented by the field's
    metadata (:func:`evolve.search.config.setting_of`); values are checked by :func:`evolve.search.config.resolve`."""
    from evolve.search.config import kind_setting_fields, setting_of

    for name in reversed(RUN_OPTIONS):
        s = setting_of(name)
        option_type = (LiveChoice(lambda field=name: setting_of(field).choices) if s.choices
                       else {int: int, float: float}.get(s.type, str))
        if s.type is int:  # bounded as the setting (a count bounded by the population: the population's bound)
            high = s.high if s.high is not None else setting_of("population").high
            option_type = click.IntRange(s.low, high)
        callback = None
        if s.type is tuple:  # a comma-separated list (features), or the one word "auto"
            option_type, callback = CommaList(str, distinct=True), _auto_or_list
        if name in RUN_OUTPUTS:  # written: never part of the input inventory (evolve.cli.inventory)
            option_type = OutputPath()
        note = f" {RUN_OPTION_NOTES[name]}" if name in RUN_OPTION_NOTES else ""
        if name == "evolve":
            note = f" {_kinds_note()}"
        default = ("from --evolve" if name == "objective" else  # resolve() picks it
                   DEFAULTS.to_dict()[name] if name in DEFAULTS.to_dict() else kind_setting_fields()[name].default)
        fn = click.option(f"--{name.replace('_', '-')}", name, type=option_type, default=None, callback=callback,
                          help=f"{s.help}{note} [default: {default}]")(fn)
    return fn


def _auto_or_list(ctx, param, value):
    """``("auto",)`` of a :class:`CommaList` option as the word ``auto``; any other list as it is."""
    return "auto" if value == ("auto",) else value


def _target_engines() -> tuple[str, ...]:
    from evolve.commands.target_engine import TARGET_ENGINES
    return tuple(TARGET_ENGINES)


def _objective_names() -> tuple[str, ...]:
    from evolve.search.config import setting_of
    return setting_of("objective").choices


@cli.command(inputs=RUN_INPUTS)
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="TOML file of run settings (keys as the options, with _); options given here override it.")
@_setting_options
@click.option("--fitness", "fitness", hidden=True, default=None, type=click.Choice(_objective_names()),
              help="The old name of --objective (same values).")
@legacy_option("--verify", "--verify block is now --evolve relaxation (the programs are weights of relaxed "
                            "block verification; block verification itself is lossless), --verify token is "
                            "--evolve threshold")
@click.option("--warm-start/--from-scratch", "warm_start", default=None,
              help="Warm start: seed the initial population with the registered rules and the best grid members "
                   "of the published families, keep the best seeded rule as champion unless evolution beats it "
                   "on valid, and avoid champions on the quality floor. --from-scratch: random trees only, "
                   "champion = best on valid (the rediscovery runs) [default: warm start].")
@click.option("--scheduler", default=None, envvar="DASK_SCHEDULER_ADDRESS", metavar="ADDRESS",
              help="Dask scheduler to run the islands on (e.g. tcp://host:8786) [default: $DASK_SCHEDULER_ADDRESS, "
                   "else a local cluster on this machine].")
@click.option("--workers", type=click.IntRange(1, MAX_THREADS), default=None,
              help="Workers of the local Dask cluster [default: one per island, at most one per core].")
@click.option("--target-engine", "target_engine", default=None, type=LiveChoice(_target_engines),
              help="The engine the champion will run in: the features are bounded to what its drafter gives before "
                   "a draft step (llama-cpp-python, and transformers-generate, whose module drafts the same: "
                   "draft_index, position, the text's history, and lookup_len, "
                   "lookup_freq on a prompt-lookup dataset or the suffix_* columns on a suffix-decoding one), so the "
                   "champion exports there (with --costs its own cost file, benchmark.py perf "
                   "--write-costs FILE --engine NAME, the search optimises the engine's speed).")
@click.option("--progress/--no-progress", default=True, help="Show a progress bar on stderr [default: on].")
def run(config_file, progress, scheduler, workers, target_engine, **options) -> int:
    """Evolve programs of one kind (--evolve) and keep the best as the champion; print the run directory on
    stdout (the champion and its scores on stderr).

    Ctrl-C finishes the current generation (epoch, with islands) and still writes the champion; the exit
    code is then 130. A checkpoint is kept after every epoch: `python -m evolve resume` continues a run
    that was killed.
    """
    from evolve.search.config import resolve
    from evolve.search.interrupt import graceful_interrupt

    fitness = options.pop("fitness")
    if fitness is not None:
        if options.get("objective") is not None:
            from evolve.errors import InputError
            raise InputError("--fitness is the old name of --objective; give only --objective")
        options["objective"] = fitness
    cfg = resolve(options, config_file)
    if target_engine is not None:
        from evolve.commands.target_engine import for_engine

        cfg = for_engine(cfg, target_engine)
    cluster = _cluster(scheduler, workers)
    with _progress_bar(cfg, progress) as on_generation, graceful_interrupt() as stop:
        info = run_and_plot(cfg, progress=on_generation, stop=stop, cluster=cluster, say=_stderr if progress else None)
    return _report(info, cfg)


@cli.command(inputs=("data",))
@click.argument("run_dir", type=click.Path())
@click.option("--data", default=None, help="The dataset directory, if it moved since the run started (it must "
                                           "hold the same train and valid files) [default: where the run read it].")
@click.option("--scheduler", default=None, envvar="DASK_SCHEDULER_ADDRESS", metavar="ADDRESS",
              help="Dask scheduler for an island run [default: $DASK_SCHEDULER_ADDRESS, else a local cluster].")
@click.option("--workers", type=click.IntRange(1, MAX_THREADS), default=None,
              help="Workers of the local Dask cluster [default: one per island, at most one per core].")
@click.option("--progress/--no-progress", default=True, help="Show a progress bar on stderr [default: on].")
def resume(run_dir, data, scheduler, workers, progress) -> int:
    """Continue the stopped run RUN_DIR from its last checkpoint; print the run directory on the last line.

    RUN_DIR is the run's checkpoint directory (OUT/.run-...partial), the run directory of a run stopped
    by Ctrl-C, or OUT when it holds one stopped run. The champion and logbook are those the run would
    have had without the stop. Different data or changed settings, a damaged checkpoint, and a second
    resume of a run that is still running or resuming are refused, with the reason.
    """
    from evolve.search.interrupt import graceful_interrupt
    from evolve.search.rundir import resume_config

    cfg = resume_config(run_dir)  # the checkpoint's settings, checked (for the progress bar)
    with _progress_bar(cfg, progress) as on_generation, graceful_interrupt() as stop:
        info = run_and_plot(cfg, progress=on_generation, stop=stop, cluster=_cluster(scheduler, workers),
                            say=_stderr if progress else None,
                            resume_from=run_dir, data=data)
    return _report(info, info.result.config)


def _cluster(scheduler, workers):
    """The :class:`evolve.cluster.ClusterOptions` of ``--scheduler`` and ``--workers``."""
    from evolve.cluster import ClusterOptions

    return ClusterOptions(scheduler=scheduler or None, workers=workers)


def _report(info, cfg) -> int:
    """Print the outcome of a run; returns the exit code (130 after Ctrl-C).

    The report (champion, where it comes from, its scores) goes to stderr, with the progress bar; stdout
    holds the run directory alone, so ``RUN=$(python -m evolve run)`` captures it and the user still
    reads the report.
    """
    res = info.result
    champ = res.champion
    if res.interrupted:
        click.echo(f"interrupted after generation {res.generations}; champion written", err=True)
        if info.checkpoint_dir is not None:
            click.echo(f"`python -m evolve resume {info.run_dir}` finishes the run", err=True)
    click.echo(f"champion: {champ.expression}", err=True)
    line = _source_line(res.champion_source, res.warm_start, res.guard)
    if line:
        click.echo(line, err=True)
    if res.guard is not None:
        click.echo(textwrap.fill(f"guard: {printable(res.guard.reason)}", 100, subsequent_indent="  "), err=True)
    click.echo(f"size {champ.size}, {cfg.objective} objective train {_fit(champ.train, cfg):.6f}, "
               f"valid {_fit(champ.valid, cfg):.6f}; {res.programs} programs scored "
               f"in {res.seconds:.1f} s", err=True)
    if champ.valid.tokens_per_call is not None:
        scope = f" (gamma {cfg.gamma})" if cfg.program_kind.reads_gamma else ""
        click.echo(f"valid: {champ.valid.tokens_per_call:.4f} tokens per target call (mean acceptance length), "
                   f"{champ.valid.tv_per_token:.5f} TV per token{scope}", err=True)
    if res.front is not None:
        click.echo(f"front: {counted(len(res.front), 'rule')} in {info.run_dir / 'front.json'}", err=True)
    click.echo(str(info.run_dir))
    return EXIT_INTERRUPTED if res.interrupted else 0


def _stderr(line: str) -> None:
    """A line of progress on stderr (with the progress bar)."""
    click.echo(line, err=True)


def run_and_plot(cfg, progress=None, stop=None, cluster=None, resume_from=None, data=None, say=None):
    """A whole run as ``python -m evolve run`` makes it: :func:`evolve.search.rundir.run` plus ``fitness.png``.

    The fitness plot (:func:`evolve.report.runplot.plot_logbook`) is drawn
    after the search and written into the run directory with the other files
    (atomically, before the directory is renamed into place). With
    ``resume_from`` (a path for :func:`evolve.search.rundir.resume`, which
    then also takes ``data``) a stopped run is continued instead and ``cfg``
    is not used. Arguments (``say``: lines of progress after the generations) and errors as
    :func:`evolve.search.rundir.run`; returns its ``RunInfo``.
    """
    from evolve.report.runplot import plot_logbook
    from evolve.search.rundir import resume, run

    plot = {"fitness.png": lambda result: plot_logbook(result.logbook, result.config.objective)}
    if resume_from is not None:
        return resume(resume_from, progress=progress, stop=stop, extra_files=plot, cluster=cluster, data=data, say=say)
    return run(cfg, progress=progress, stop=stop, extra_files=plot, cluster=cluster, say=say)


def _source_line(source: str | None, warm_start, guard=None) -> str | None:
    """One line on where the champion comes from, or None when the run did not record it.

    ``source`` is ``"seeded:NAME"`` or ``"evolved"``; ``warm_start`` the seeded
    rule names (a list, or a :class:`evolve.search.warm_start.WarmStart`), or
    None for a run from scratch; ``guard`` the champion guard's record (a
    :class:`evolve.search.guard.GuardResult` or its dict), None when it did not run.
    """
    from evolve.search.run_documents import seeded_name

    if not isinstance(source, str):
        return None
    name = seeded_name(source)
    kept = guard.get("kept") if isinstance(guard, dict) else getattr(guard, "kept", None)
    if name is not None and kept is False:
        return (f"champion: the seeded rule {printable(name)} (the champion guard kept it: evolution's best was not "
                f"ahead of it by more than the noise)")
    if name is not None:
        return f"champion: the seeded rule {printable(name)} (evolution found nothing better on valid)"
    if warm_start is None:
        return "champion: evolved from random trees (no warm start)"
    count = len(getattr(warm_start, "seeds", warm_start))
    return f"champion: evolved (warm start with {count} seeded rules; it beats them on valid)"


def _fit(metrics, cfg) -> float:
    """The run's objective (the champion criterion for pareto runs) of ``metrics``."""
    from evolve.search.state import score
    return score(metrics, cfg)


class _progress_bar:
    """Context manager yielding a per-generation callback: a rich progress bar when stderr is a terminal, else
    plain lines every few seconds (:class:`evolve.cli.output.ProgressLines`). Generation g of G counts the
    generations after the initial population (generation 0), as ``--generations`` does."""

    def __init__(self, cfg, enabled: bool):
        self.cfg, self.enabled = cfg, enabled
        self.progress = None

    def __enter__(self):
        if not self.enabled:
            return None
        if not stderr_is_terminal():
            lines = ProgressLines("generation")

            def plain(row):
                lines(int(row["gen"]), self.cfg.generations, f"best train {row['train_max']:.5f}  valid "
                                                             f"{row['best_valid']:.5f}  mean size {row['size_avg']:.1f}")
            return plain

        def update(row):
            if self.progress is None:  # started on the first generation, after the data loaded
                self._start()
            self.progress.update(self.task, completed=row["gen"], train=f"{row['train_max']:.5f}",
                                 valid=f"{row['best_valid']:.5f}", size=f"{row['size_avg']:.1f}", refresh=True)
        return update

    def _start(self):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("generation"), MofNCompleteColumn(), BarColumn(),
            TextColumn("best train {task.fields[train]}  valid {task.fields[valid]}  mean size {task.fields[size]}"),
            TimeElapsedColumn(), console=Console(stderr=True), transient=False,
            auto_refresh=False)  # no refresh thread: rich draws from `random`, which the search owns
        self.progress.start()
        self.task = self.progress.add_task("evolve", total=self.cfg.generations, train="-", valid="-",
                                           size="-")

    def __exit__(self, *exc):
        if self.progress is not None:
            self.progress.stop()
        return False


def _say(line: str) -> None:
    """One ``show`` field (``label:     value``) wrapped to 100 columns, continuation lines under the value (a word
    longer than that, such as a long path, stays whole). Values read from a file (a recorded reason, a path) are
    printed with their control characters escaped (:func:`evolve.errors.printable`): an escape sequence in a champion
    file never reaches the terminal."""
    import textwrap

    line = printable(line)
    click.echo("\n".join(textwrap.wrap(line, 100, subsequent_indent=" " * 12, break_long_words=False,
                                       break_on_hyphens=False)) or line)


@cli.command()
@click.argument("run_dir", type=click.Path())
def show(run_dir) -> None:
    """Print the champion of RUN_DIR (or of a champion .json file), simplified, and its metrics.

    RUN_DIR may also be the checkpoint directory (OUT/.run-...partial) of a run stopped by Ctrl-C: the
    champion is then that of the run directory written at the stop.
    """
    from evolve.errors import InputError
    from evolve.gp.compiler import simplify
    from evolve.search.rundir import checkpoint_status
    from evolve.search.run_documents import interrupted_run_dir
    from heuristics.champions import read_champion

    written = None
    if os.path.isdir(run_dir) and not os.path.isfile(os.path.join(run_dir, "champion.json")):
        written = interrupted_run_dir(run_dir)
        status = checkpoint_status(run_dir) if written is None else None
        if status is not None:
            raise InputError(status)
    champ = read_champion(run_dir if written is None else written)
    nodes = champ.nodes
    if written is not None:
        _say(f"checkpoint: {run_dir} holds the run stopped by Ctrl-C; its champion, shown here, was written "
                   f"to {written} (`python -m evolve resume {run_dir}` finishes the run)")
    _say(f"champion:   {champ.expression}")
    prov = champ.provenance if isinstance(champ.provenance, dict) else {}
    checked = prov.get("champion_guard")
    line = _source_line(prov.get("champion_source"), prov.get("seeded_rules"), checked)
    if line:
        _say(line.replace("champion: ", "origin:     ", 1))
    if isinstance(checked, dict) and isinstance(checked.get("reason"), str):
        _say(f"guard:      {checked['reason']}")
    if len(nodes) <= SIMPLIFY_MAX_NODES:
        text = _with_time_limit(lambda: str(simplify(nodes)), SYMPY_SECONDS)
        _say(f"simplified: {text}" if text is not None else
                   f"simplified: (sympy gave up or took over {SYMPY_SECONDS} s; the expression above is exact)")
    else:
        _say(f"simplified: (not attempted: {len(nodes)} nodes > {SIMPLIFY_MAX_NODES}; sympy can take hours "
                   "on large nested if_gt trees)")
    _say(f"size:       {len(nodes)} nodes; kind: {champ.kind} ({champ.program_kind.title}); objective: "
               f"{champ.objective}; "
               f"features: {', '.join(champ.features)}")
    prov = champ.provenance
    if isinstance(prov, dict) and prov.get("run_dir"):
        _say(f"run:        {prov.get('run_dir')} (seed {prov.get('seed')}, data {prov.get('data_dir')})")
    if isinstance(prov, dict) and prov.get("interrupted") is True:
        asked = prov.get("config", {}).get("generations") if isinstance(prov.get("config"), dict) else None
        _say(f"interrupted: by Ctrl-C after {prov.get('generations_completed')} of {asked} generations "
                   "(the champion is the best found until then)")
    splits = [s for s in ("train", "valid", "test") if s in champ.metrics]
    keys = ["records", "acceptance_rate", "accuracy", "false_accepts", "false_rejects", "quality_score",
            "fitness", "expected_acceptance", "expected_tv", "expected_false_reject", "expected_quality",
            "expected_fitness", "n_invalid"]
    keys += sorted({k for s in splits for k in champ.metrics[s]} - set(keys))
    click.echo(f"{'metric':<24}" + "".join(f"{s:>14}" for s in splits))
    for k in keys:
        cells = []
        for s in splits:
            v = champ.metrics[s].get(k)
            cells.append(f"{'-':>14}" if v is None else f"{v:>14d}" if isinstance(v, int) else f"{v:>14.6f}")
        click.echo(f"{printable(k):<24}" + "".join(cells))


@cli.command()
@click.argument("run_dir", type=click.Path())
@click.argument("name")
@click.option("--champions-dir", type=OutputPath(file_okay=False), default=None, envvar="SPECDEC_CHAMPIONS_DIR",
              help="Where champions are kept [default: heuristics/champions/, or $SPECDEC_CHAMPIONS_DIR].")
@click.option("--force", is_flag=True, help="Replace an existing champion of that name.")
def promote(run_dir, name, champions_dir, force) -> None:
    """Copy the champion of RUN_DIR into the champions directory as NAME.json and NAME.py."""
    from evolve.errors import InputError
    from heuristics.champions import ChampionExists, check_name, read_champion
    from heuristics.champions import promote as promote_champion

    check_name(name, "NAME")
    rule = read_champion(run_dir).rule()
    rule.program_kind.check_rule(rule)  # no champion whose settings (its verifier) do not hold is promoted
    try:
        json_path, py_path = promote_champion(run_dir, name, champions_dir, overwrite=force)
    except ChampionExists as exc:
        raise InputError(f"{exc.path}: a champion named {exc.name!r} exists already (use --force to replace "
                         f"it)") from None
    click.echo(f"wrote {py_path}")
    click.echo(str(json_path))


cli.add_command(export)
cli.add_command(train_drafter)
