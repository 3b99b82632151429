"""The fresh process of `python -m benchmarks search`: open a store, search, print timings.

`python -m benchmarks.search_worker '<json spec>'` is started by `benchmarks.search` for each
measurement that must not see what the parent process archived or decoded (its `EntryCache`
starts empty, as in a worker that never served the thread). Everything is imported before
any clock starts; a search's time includes opening the store's connection when the spec says
the job opens its own store (`"open": true`), as a worker that was just started does.

The spec: `backend` ("sqlite" or "postgres"), `conn` (the SQLite file or the PostgreSQL
conninfo), `path` ("scan" or "index", see `benchmarks.search_paths`), `jobs` (each a
`thread` and its `queries`, `[query, options]` pairs run in order), `concurrent` (run the
jobs at once, one Python thread and one connection each, released together by a barrier) and
`open_per_job` (each job opens its own store, timed; false: one store, opened untimed, serves
all jobs). It prints one JSON line: per job, its connection time and each query's seconds and answer
header; and the process's resident memory (VmRSS, VmHWM in kB) before and after.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.search_paths import archive_backend, open_store
from langgraph_ctx.archive import Archive, search_archive

# Imported up front, so that no clock counts an import.
with contextlib.suppress(ImportError):
    import langgraph.store.sqlite
with contextlib.suppress(ImportError):
    import langgraph.store.postgres  # noqa: F401


def memory_kb() -> dict[str, int]:
    """This process's VmRSS and VmHWM (peak) in kB, from /proc/self/status (0 elsewhere)."""
    found = {"rss": 0, "hwm": 0}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                found["rss"] = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                found["hwm"] = int(line.split()[1])
    return found


def _run_job(spec: dict[str, Any], job: dict[str, Any], backend: Any | None) -> dict[str, Any]:
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if backend is None:
            store = stack.enter_context(open_store(spec["backend"], spec["conn"], spec["path"]))
            backend = archive_backend(store, spec["path"])
        opened = time.perf_counter() - started
        archive = Archive(backend, thread_id=job["thread"])
        times: list[float] = []
        heads: list[str] = []
        partial: list[bool] = []
        for query, options in job["queries"]:
            began = time.perf_counter()
            answer = search_archive(archive, query, **options)
            times.append(time.perf_counter() - began)
            heads.append(answer.split("\n", 1)[0][:300])
            partial.append("partial" in answer.lower())
    return {"open": opened, "times": times, "heads": heads, "partial": partial}


@contextlib.contextmanager
def _shared_backend(spec: dict[str, Any]) -> Iterator[Any | None]:
    if spec.get("open_per_job", True):
        yield None
        return
    with open_store(spec["backend"], spec["conn"], spec["path"]) as store:
        yield archive_backend(store, spec["path"])


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the spec's jobs (in order, or all at once) and measure them."""
    before = memory_kb()
    results: list[dict[str, Any]] = [{} for _ in spec["jobs"]]
    if spec.get("concurrent"):
        barrier = threading.Barrier(len(spec["jobs"]))

        def one(n: int) -> None:
            barrier.wait()
            results[n] = _run_job(spec, spec["jobs"][n], None)

        threads = [threading.Thread(target=one, args=(n,)) for n in range(len(spec["jobs"]))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    else:
        with _shared_backend(spec) as backend:
            for n, job in enumerate(spec["jobs"]):
                results[n] = _run_job(spec, job, backend)
    after = memory_kb()
    return {"jobs": results, "before": before, "after": after}


if __name__ == "__main__":
    print(json.dumps(run(json.loads(sys.argv[1]))), flush=True)
