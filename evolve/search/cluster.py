"""Where the tasks of an island search run: an embedded Dask ``LocalCluster`` or an existing Dask cluster.

Dask distributed (https://distributed.dask.org) runs the island epochs as
futures: a task lost with its worker is run again on another one, and the
scheduler may be anywhere the client can reach. :func:`dask_client` yields a
connected ``distributed.Client``:

* without a scheduler address: a ``LocalCluster`` on the loopback interface,
  one process per worker with one Dask thread each (``workers`` workers;
  default one per island, at most one per core), closed at the end;
* with an address (``tcp://host:8786``; the usual ``DASK_SCHEDULER_ADDRESS``
  convention is read by the command line): the client joins that cluster and
  leaves its workers running. Slurm or PBS users start such a cluster with
  dask-jobqueue (see docs/distributed.md).

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

from data.errors import InputError

#: Seconds the client waits to reach a scheduler.
CONNECT_TIMEOUT = 30


@dataclass(frozen=True)
class ClusterOptions:
    """How to run the island tasks: ``scheduler`` address (None: an embedded LocalCluster) and ``workers``
    (LocalCluster processes; None: one per island, at most one per core)."""

    scheduler: str | None = None
    workers: int | None = None


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
        tasks: the number of tasks that run at once (the islands).

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
            yield client, None
        finally:
            client.close()
        return
    workers = local_workers(options, tasks)
    try:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=None, silence_logs=logging.ERROR)
    except (OSError, RuntimeError) as exc:
        raise InputError(f"cannot start a local Dask cluster of {workers} workers "
                         f"({' '.join(str(exc).split())})") from None
    client = Client(cluster)
    try:
        yield client, max(1, (os.cpu_count() or 1) // workers)
    finally:
        client.close()
        cluster.close()


__all__ = ["CONNECT_TIMEOUT", "ClusterOptions", "local_workers", "dask_client"]
