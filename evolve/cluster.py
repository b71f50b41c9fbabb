"""Where Dask tasks run (island searches, sharded harvests): an embedded ``LocalCluster`` or an existing cluster.

Dask distributed (the ``distributed`` package) runs the island epochs of a
search (:mod:`evolve.search.islands`) and the shards of a harvest
(:mod:`evolve.harvest.shards`) as futures: a task lost with its worker is run again on another one, and the
scheduler may be anywhere the client can reach. :func:`dask_client` yields a
connected ``distributed.Client``:

* without a scheduler address: a ``LocalCluster`` on the loopback interface
  (its scheduler's HTTP status pages too, on a free port), one process per worker with one Dask thread each (``workers`` workers;
  default one per concurrent task, at most one per core), closed at the end;
* with an address (``tcp://host:8786``; the usual ``DASK_SCHEDULER_ADDRESS``
  convention is read by the command line): the client joins that cluster and
  leaves its workers running. Slurm or PBS users start such a cluster with
  dask-jobqueue (see docs/tutorial/distributed.md).

Numba's own threads inside a worker: on a ``LocalCluster`` each worker gets
``cores // workers`` of them (at least 1), so islands do not oversubscribe the
machine; on an existing cluster the workers' own setting
(``NUMBA_NUM_THREADS``) is left alone.
"""
from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from evolve.errors import InputError

#: Seconds the client waits to reach a scheduler.
CONNECT_TIMEOUT = 30


@dataclass(frozen=True)
class ClusterOptions:
    """How to run the tasks: ``scheduler`` address (None: an embedded LocalCluster), ``workers``
    (LocalCluster processes; None: one per concurrent task, at most one per core) and ``numba_threads`` per task
    (None: ``cores // workers`` on a LocalCluster, the workers' own setting on an existing cluster)."""

    scheduler: str | None = None
    workers: int | None = None
    numba_threads: int | None = None


def local_workers(options: ClusterOptions, tasks: int) -> int:
    """Number of LocalCluster workers for ``tasks`` concurrent tasks (at least 1)."""
    if options.workers is not None:
        if options.workers < 1:
            raise InputError(f"workers: must be at least 1 (value {options.workers})")
        return options.workers
    return max(1, min(tasks, os.cpu_count() or 1))


@contextmanager
def dask_client(options: ClusterOptions, tasks: int) -> Iterator[tuple[object, int | None]]:
    """Yield (a connected ``distributed.Client``, Numba threads per task or None) (see the module doc).

    Args:
        options: scheduler address and LocalCluster size.
        tasks: the number of tasks that can run at once (the islands, the shards).

    Raises: InputError when the scheduler cannot be reached or the LocalCluster cannot start.
    """
    from distributed import Client, LocalCluster

    if options.scheduler:
        try:
            client = Client(options.scheduler, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as exc:
            raise InputError(f"Dask scheduler {options.scheduler}: cannot connect "
                             f"({' '.join(str(exc).split()) or type(exc).__name__})") from None
        try:
            yield client, options.numba_threads
        finally:
            client.close()
        return
    workers = local_workers(options, tasks)
    try:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    except (OSError, RuntimeError) as exc:
        raise InputError(f"cannot start a local Dask cluster of {workers} workers "
                         f"({' '.join(str(exc).split())})") from None
    client = Client(cluster)
    try:
        yield client, options.numba_threads or max(1, (os.cpu_count() or 1) // workers)
    finally:
        client.close()
        cluster.close()


__all__ = ["CONNECT_TIMEOUT", "ClusterOptions", "local_workers", "dask_client"]
