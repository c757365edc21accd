"""Where trials run: in this process, on a local Dask cluster, or on an existing Dask scheduler.

Local Dask workers are started non-daemonic (``distributed.worker.daemon: False``) so a trial can
start DataLoader worker processes. Workers of an external cluster need the same setting in their
own Dask config (e.g. ``DASK_DISTRIBUTED__WORKER__DAEMON=False``). A trial whose worker process
dies (e.g. killed for memory) comes back as an error and is recorded as crashed.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Protocol


class TrialPool(Protocol):
    """Runs submitted calls and hands back results as they finish."""

    capacity: int

    def submit(self, token: Any, fn: Callable[..., Any], *args: Any) -> None: ...

    def next_finished(self) -> tuple[Any, Any, BaseException | None]:
        """Block until a call finishes; return (token, result, None) or (token, None, error)."""
        ...

    def __len__(self) -> int: ...


class InlinePool:
    """Runs one call at a time, in this process, when its result is asked for."""

    capacity = 1

    def __init__(self) -> None:
        self._queue: deque[tuple[Any, Callable[..., Any], tuple]] = deque()

    def submit(self, token: Any, fn: Callable[..., Any], *args: Any) -> None:
        self._queue.append((token, fn, args))

    def next_finished(self) -> tuple[Any, Any, BaseException | None]:
        token, fn, args = self._queue.popleft()
        return token, fn(*args), None

    def __len__(self) -> int:
        return len(self._queue)


class DaskPool:
    """Runs up to ``capacity`` calls at once on a Dask cluster."""

    def __init__(self, client: Any, capacity: int):
        from distributed import as_completed

        self.capacity = capacity
        self._client = client
        self._tokens: dict[str, Any] = {}
        self._finished = as_completed()

    def submit(self, token: Any, fn: Callable[..., Any], *args: Any) -> None:
        future = self._client.submit(fn, *args, pure=False)
        self._tokens[future.key] = token
        self._finished.add(future)

    def next_finished(self) -> tuple[Any, Any, BaseException | None]:
        future = next(self._finished)
        token = self._tokens.pop(future.key)
        try:
            return token, future.result(), None
        except Exception as error:  # e.g. KilledWorker when a worker process dies
            return token, None, error
        finally:
            future.release()

    def __len__(self) -> int:
        return len(self._tokens)

    @property
    def address(self) -> str:
        """The scheduler's address, for another pool on the same workers (a study's search)."""
        return self._client.scheduler.address


@contextlib.contextmanager
def open_pool(
    n_workers: int, *, dask_address: str | None = None, dask_scheduler_file: str | None = None
) -> Iterator[TrialPool]:
    """A pool for ``n_workers`` concurrent trials (in-process when 1 and no scheduler is given)."""
    if dask_address is not None and dask_scheduler_file is not None:
        raise ValueError("give dask_address or dask_scheduler_file, not both")
    if dask_address is None and dask_scheduler_file is None and n_workers == 1:
        yield InlinePool()
        return

    import dask
    from distributed import Client, LocalCluster

    if dask_address is not None or dask_scheduler_file is not None:
        with Client(address=dask_address, scheduler_file=dask_scheduler_file) as client:
            yield DaskPool(client, n_workers)
        return
    with (
        # non-daemonic workers (also those the nanny restarts); a trial that kills its worker is
        # recorded as crashed instead of being retried on the next worker
        dask.config.set({"distributed.worker.daemon": False, "distributed.scheduler.allowed-failures": 0}),
        LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        yield DaskPool(client, n_workers)
