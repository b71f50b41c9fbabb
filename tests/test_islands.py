"""The island model on Dask: determinism whatever the workers, all fitness kinds, resume, a killed worker.

Every test runs on a Dask LocalCluster on the loopback interface (one module-wide cluster of two
worker processes, plus the embedded one-worker cluster of one test) and stays small.
"""
from __future__ import annotations

import copy
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from evolve.traces.io import load_split, write_dataset
from evolve.traces.synth.independent import generate_split
from evolve.cli.evolve import cli as evolve_cli
from evolve.eval.evaluator import EvalData
from evolve.gp.compiler import parse, to_tree
from evolve.gp.primitives import CORE_FEATURES, build_pset
from evolve.search.checkpoint import Island, split_sha256
from evolve.cluster import ClusterOptions
from evolve.search.config import resolve
from evolve.search.individuals import HallOfFame, Individual
from evolve.search.island_task import island_seed
from evolve.search.islands import island_search, migrate
from evolve.search.state import TIMING_COLUMNS

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    """Two single-threaded worker processes on 127.0.0.1 (status pages on a free loopback port)."""
    import logging

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR) as c:
        yield c


def _splits(directory: Path) -> tuple:
    traces = [load_split(directory, s) for s in ("train", "valid")]
    sha = {t.split: split_sha256(t.source, t.split) for t in traces}
    return EvalData.from_traces(traces[0]), EvalData.from_traces(traces[1]), sha


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("islands") / "data"
    write_dataset(d, {"train": generate_split(40, 11), "valid": generate_split(20, 12)}, {"generator": "independent"})
    return d


def _strip(logbook) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in logbook]


def _search(data: Path, options: ClusterOptions, **settings):
    cfg = resolve({"data": str(data), "population": 30, "generations": 6, "seed": 3, "migration_interval": 2,
                   "islands": 3, "migrants": 3, **settings})
    train, valid, sha = _splits(data)
    snapshots = []
    result = island_search(cfg, train, valid, CORE_FEATURES, sha, options,
                           on_epoch=lambda s: snapshots.append(copy.deepcopy(s)))
    return cfg, result, snapshots


def test_same_champion_whatever_the_number_of_workers_and_resume(data, cluster):
    cfg, two, snapshots = _search(data, ClusterOptions(scheduler=cluster.scheduler_address))
    _, one, _ = _search(data, ClusterOptions(workers=1))
    assert two.champion.expression == one.champion.expression
    assert [e.expression for e in two.hall_of_fame] == [e.expression for e in one.hall_of_fame]
    assert _strip(two.logbook) == _strip(one.logbook)
    assert [r["gen"] for r in two.logbook] == list(range(7)) and two.logbook[0]["nevals"] == 90
    assert [s.generation for s in snapshots] == [2, 4, 6] and len(snapshots[0].islands) == 3
    train, valid, sha = _splits(data)
    again = island_search(cfg, train, valid, CORE_FEATURES, sha,
                          ClusterOptions(scheduler=cluster.scheduler_address), resume=snapshots[0])
    assert again.champion.expression == two.champion.expression and _strip(again.logbook) == _strip(two.logbook)
    assert (again.evaluations, again.programs) == (two.evaluations, two.programs)


@pytest.mark.parametrize("fitness", ["acceptance_quality", "expected", "speed_at_tv", "pareto"])
def test_every_fitness_kind_runs_on_islands(fitness, vocab_dataset, cluster):
    cfg = resolve({"data": str(vocab_dataset), "population": 16, "generations": 2, "seed": 1,
                   "migration_interval": 1, "islands": 2, "migrants": 2, "objective": fitness})
    train, valid, sha = _splits(vocab_dataset)
    res = island_search(cfg, train, valid, CORE_FEATURES, sha,
                        ClusterOptions(scheduler=cluster.scheduler_address))
    assert [r["gen"] for r in res.logbook] == [0, 1, 2] and not res.interrupted
    assert (res.front is not None) == (fitness == "pareto")
    assert res.champion.valid.records == valid.n


def test_a_killed_worker_does_not_change_the_champion(data, cluster):
    """SIGKILL one of the two worker processes while it runs an island epoch; its task is run again."""
    settings = {"population": 60, "generations": 12, "islands": 2, "migrants": 2}
    _, calm, _ = _search(data, ClusterOptions(scheduler=cluster.scheduler_address), **settings)
    killed = []

    def killer():
        with distributed.Client(cluster.scheduler_address) as watcher:
            pids = watcher.run(os.getpid)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not killed:
                for worker, keys in watcher.processing().items():
                    if any("-gen-6-" in str(k) for k in keys) and worker in pids:
                        os.kill(pids[worker], signal.SIGKILL)
                        killed.append(worker)
                        break
                time.sleep(0.002)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    _, hurt, _ = _search(data, ClusterOptions(scheduler=cluster.scheduler_address), **settings)
    thread.join(timeout=60)
    assert killed, "no worker was killed (the epochs ran too fast to catch)"
    assert hurt.champion.expression == calm.champion.expression
    assert _strip(hurt.logbook) == _strip(calm.logbook)
    cluster.wait_for_workers(2, timeout=60)  # the nanny restarted the killed worker


def test_ring_migration_moves_the_best_into_the_worst():
    pset = build_pset(CORE_FEATURES)

    def island(values: list[float]) -> Island:
        population = []
        for v in values:
            ind = Individual(to_tree(parse(f"mul({v}, target_prob)"), pset))
            ind.fitness.values = (v,)
            population.append(ind)
        hof = HallOfFame(2)
        hof.update(population)
        return Island(population, hof, 4)

    islands = [island([0.1, 0.9, 0.5, 0.2]), island([0.3, 0.4, 0.0, 0.8])]
    migrate(islands, 2, pareto=False)
    # island 0 gets island 1's two best (0.8, 0.4) in place of its two worst (0.1 at 0, 0.2 at 3), and back
    assert [i.fitness.values[0] for i in islands[0].population] == [0.8, 0.9, 0.5, 0.4]
    assert [i.fitness.values[0] for i in islands[1].population] == [0.9, 0.4, 0.5, 0.8]
    assert islands[1].population[0] is not islands[0].population[1]  # migrants are copies
    assert str(islands[1].population[0]) == str(islands[0].population[1])
    assert [m.fitness.values[0] for m in islands[1].hof] == [0.9, 0.8]
    assert island_seed(5, 0) == 5 and island_seed(5, 1) != island_seed(5, 2)


def test_cli_island_run_and_options(data, cluster, tmp_path, monkeypatch):
    import evolve.cluster as cluster_mod

    res = CliRunner().invoke(evolve_cli, ["run", "--data", str(data), "--out", str(tmp_path), "--population", "12",
                                          "--generations", "2", "--islands", "2", "--migrants", "2",
                                          "--migration-interval", "1", "--scheduler", cluster.scheduler_address,
                                          "--no-progress"])
    assert res.exit_code == 0, res.output
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["config"]["islands"] == 2 and summary["generations_completed"] == 2
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    bad = CliRunner().invoke(evolve_cli, ["run", "--data", str(data), "--out", str(tmp_path), "--islands", "2",
                                          "--population", "4", "--migrants", "4"])
    assert bad.exit_code == 2 and "option '--migrants'" in bad.stderr
    monkeypatch.setattr(cluster_mod, "CONNECT_TIMEOUT", 2)
    unreachable = CliRunner().invoke(evolve_cli, ["run", "--data", str(data), "--out", str(tmp_path), "--islands",
                                                  "2", "--population", "4", "--generations", "0", "--migrants", "1",
                                                  "--scheduler", "tcp://127.0.0.1:9", "--no-progress"])
    assert unreachable.exit_code == 2 and "tcp://127.0.0.1:9" in unreachable.stderr, unreachable.output
    assert len(unreachable.stderr.strip().splitlines()) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing to resume: no checkpoint kept
