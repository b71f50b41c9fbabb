"""One epoch of one island, as a Dask task: population, hall of fame and random states in, the same out.

:func:`run_epoch` is stateless: everything that determines its outcome is in
its :class:`EpochJob` (the configuration, the island's pickled
:class:`evolve.search.checkpoint.Island`, the generation to stop at, the warm
start), so a task lost with its worker is simply run again elsewhere with the
same result. The only state a worker keeps is a cache of the dataset: the
train and valid splits are read once per worker process from their path (a
path every worker can read, e.g. on a shared file system), checked against the
SHA-256 digests the client computed, and kept for the next epochs; they are
not shipped with the tasks. The other files the run pinned (a cost file, a
verifier's champion file; ``EpochJob.inputs``) and the tree tables of the
dataset are read by each task with their pinned content or refused, one line
naming the file (:mod:`evolve.files.pins`).

A fresh island (empty ``state``) seeds Python's ``random`` and numpy with
:func:`island_seed`, draws its initial population (the warm start's seeds as
its first members), scores it (generation 0) and evolves on. Each task scores
with a fresh evaluator cache, so the logbook's ``new_programs`` does not depend
on which worker ran which epoch.

DEAP draws from the global ``random`` module, and so do the threads of a
Dask worker (its event loop picks peers and retry delays with it). An epoch
therefore runs with a private ``random.Random`` of its own thread
(:func:`private_random`: while it is active, the functions of the ``random``
module called from that thread use it; other threads keep the shared
generator), and the epochs of one worker process take turns
(:data:`_EPOCH_LOCK`; with one Dask thread per worker, the LocalCluster default,
nothing waits).
"""
from __future__ import annotations

import os
import pickle
import random
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from evolve.errors import InputError
from evolve.traces.io import load_split
from evolve.eval.evaluator import EvalData
from evolve.gp.primitives import build_pset
from evolve.search.algorithms import advance, begin
from evolve.search.checkpoint import read_pinned, split_sha256
from evolve.search.config import resolve
from evolve.search.individuals import deap_types
from evolve.search.operators import toolbox
from evolve.search.state import SearchState, check_block_data
from evolve.search.warm_start import seed_individuals

#: The epochs of one worker process run one at a time (they share numpy's global generator).
_EPOCH_LOCK = threading.Lock()
#: Guards the one-time redirection of the ``random`` module (:func:`private_random`).
_LOCK = threading.Lock()
#: The worker's dataset cache: (directory, train SHA-256, valid SHA-256) -> (train, valid) EvalData.
_DATA: dict[tuple[str, str, str], tuple[Any, Any]] = {}


@dataclass(frozen=True)
class EpochJob:
    """What one island epoch needs.

    ``config``: ``RunConfig.to_dict()``; ``features``: terminal features;
    ``data_dir``: the dataset directory as the workers see it (absolute);
    ``data_sha256``: {"train", "valid"} digests of the split files;
    ``island``: the island's index; ``stop``: the last generation of the
    epoch; ``state``: the pickled :class:`Island` (empty for a fresh island);
    ``warm``: the :class:`evolve.search.warm_start.WarmStart` (None when off);
    ``numba_threads``: Numba threads for the task (None: the worker's setting);
    ``inputs``: the run's pinned input files, {setting: {"path", "sha256"}}
    (:func:`evolve.search.checkpoint.pin_inputs`; None: none), which the task
    reads only with their pinned content (:func:`evolve.search.checkpoint.read_pinned`).
    """

    config: dict[str, Any]
    features: tuple[str, ...]
    data_dir: str
    data_sha256: dict[str, Any]
    island: int
    stop: int
    state: bytes = b""
    warm: Any = None
    numba_threads: int | None = None
    inputs: dict[str, dict[str, str]] | None = None


@dataclass
class EpochOutcome:
    """What one island epoch returns: its pickled :class:`Island`, its logbook rows, per generation the
    fitness values (float64 (N,)) and node counts (int32 (N,)) of its population (for the run's rows),
    the individuals scored and programs run, and the task's wall time in seconds (data loading included)."""

    island: int
    state: bytes
    rows: list[dict[str, float]]
    fits: list[np.ndarray] = field(default_factory=list)
    sizes: list[np.ndarray] = field(default_factory=list)
    evaluations: int = 0
    programs: int = 0
    seconds: float = 0.0


def island_seed(seed: int, island: int) -> int:
    """The random seed of island ``island`` of a run with random seed ``seed``: ``seed`` itself for island 0
    (so island 0 starts as a one-population run), otherwise a 63-bit integer drawn from numpy's
    ``SeedSequence([seed, island])``."""
    if island == 0:
        return seed
    return int(np.random.SeedSequence([seed, island]).generate_state(1, np.uint64)[0] >> np.uint64(1))


def load_data(directory: str, data_sha256: dict[str, Any]):
    """(train, valid) :class:`evolve.eval.evaluator.EvalData` of ``directory``, read once per process.

    Raises: InputError when this process's copy of a split differs from the client's (SHA-256).
    """
    key = (os.path.abspath(directory), str(data_sha256.get("train")), str(data_sha256.get("valid")))
    if key not in _DATA:
        splits = []
        for split in ("train", "valid"):
            traces = load_split(directory, split)
            digest = split_sha256(traces.source, split, traces.sha256, pin=True)  # the digest of the bytes parsed
            if digest != data_sha256.get(split):
                raise InputError(f"{traces.source}: this worker's copy of the {split} split differs from the "
                                 f"client's (SHA-256 {str(digest)[:12]}..., expected "
                                 f"{str(data_sha256.get(split))[:12]}...)")
            splits.append(EvalData.from_traces(traces))
        _DATA.clear()  # keep one dataset per worker
        _DATA[key] = (splits[0], splits[1])
    return _DATA[key]


#: The functions of the ``random`` module that :func:`private_random` redirects.
RANDOM_FUNCTIONS: tuple[str, ...] = (
    "seed", "getstate", "setstate", "random", "uniform", "triangular", "randint", "randrange", "choice", "choices",
    "sample", "shuffle", "getrandbits", "randbytes", "gauss", "normalvariate", "lognormvariate", "expovariate",
    "vonmisesvariate", "gammavariate", "betavariate", "paretovariate", "weibullvariate", "binomialvariate",
)
_THREAD = threading.local()
_INSTALLED: list[bool] = []


def _redirect(name: str, shared):
    def call(*args, **kwargs):
        rng = getattr(_THREAD, "rng", None)
        return shared(*args, **kwargs) if rng is None else getattr(rng, name)(*args, **kwargs)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = shared.__doc__
    return call


@contextmanager
def private_random() -> Iterator[random.Random]:
    """Within the block, ``random.*`` called from this thread uses a fresh private ``random.Random``.

    The module's functions are replaced once per process by redirections that
    use the calling thread's private generator when it has one and the shared
    one otherwise, so code that calls ``random.random()`` (DEAP, the
    operators) draws from the private generator, and other threads neither
    disturb nor see it. Yields the private generator.
    """
    with _LOCK:
        if not _INSTALLED:
            for name in RANDOM_FUNCTIONS:
                if hasattr(random, name):
                    setattr(random, name, _redirect(name, getattr(random, name)))
            _INSTALLED.append(True)
    _THREAD.rng = random.Random()
    try:
        yield _THREAD.rng
    finally:
        _THREAD.rng = None


def run_epoch(job: EpochJob) -> EpochOutcome:
    """Evolve one island through generation ``job.stop`` (see the module doc). Runs on a Dask worker."""
    with _EPOCH_LOCK:
        if job.numba_threads is not None:
            import numba
            numba.set_num_threads(max(1, min(job.numba_threads, numba.config.NUMBA_NUM_THREADS)))
        saved = np.random.get_state()
        try:
            with private_random():
                return _run(job)
        finally:
            np.random.set_state(saved)


class _Recorder:
    """Keeps every generation's fitness values and node counts next to the logbook rows."""

    def __init__(self):
        self.fits: list[np.ndarray] = []
        self.sizes: list[np.ndarray] = []

    def wrap(self, state) -> None:
        record = state.record

        def recording(gen, population, candidates, nevals, t_start):
            self.fits.append(np.array([ind.fitness.values[0] for ind in population], dtype=np.float64))
            self.sizes.append(np.array([len(ind) for ind in population], dtype=np.int32))
            return record(gen, population, candidates, nevals, t_start)
        state.record = recording


def _run(job: EpochJob) -> EpochOutcome:
    t0 = time.perf_counter()
    cfg = resolve(job.config)
    read_pinned(cfg, job.inputs, f"island {job.island}", "run the epoch", "since the run started")
    train, valid = load_data(job.data_dir, job.data_sha256)
    gamma = check_block_data(cfg, train, valid)
    pset = build_pset(tuple(job.features))
    tb = toolbox(cfg, pset)
    state = SearchState(cfg, train, valid, gamma)
    recorder = _Recorder()
    recorder.wrap(state)
    if job.state:
        island = pickle.loads(job.state)
        island.restore_rng()
    else:
        seed = island_seed(cfg.seed, job.island)
        random.seed(seed)
        np.random.seed(seed % 2**32)
        started = time.perf_counter()
        population = [tb.individual() for _ in range(cfg.population)]
        seeds = seed_individuals(job.warm, pset, deap_types(cfg.objective_spec)[1]) if job.warm else []
        population[:len(seeds)] = seeds
        island = begin(state, population, started)
    advance(state, tb, island, job.stop)
    island.keep_rng()
    return EpochOutcome(job.island, pickle.dumps(island, protocol=pickle.HIGHEST_PROTOCOL), state.logbook,
                        recorder.fits, recorder.sizes, state.evaluations, state.scorer.stats.scored,
                        time.perf_counter() - t0)


__all__ = ["EpochJob", "EpochOutcome", "RANDOM_FUNCTIONS", "island_seed", "load_data", "private_random", "run_epoch"]
