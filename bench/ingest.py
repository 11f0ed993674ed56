"""Submit a benchmark's sessions as production does and wait for every job."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tqdm import tqdm

from common.errors import InvalidInput
from common.memory.changes import CommitStats
from common.models.session import SessionInput


def ingest_jobs(
    client: Any, tenant: str, items: Sequence[tuple[str, SessionInput]], desc: str, quiet: bool
) -> tuple[float, CommitStats]:
    """Submit sessions as production does, wait for every job with a progress bar, and
    return the seconds it took and the jobs' summed counts (model calls and tokens
    included); any failed job stops the benchmark with its reason."""
    started = time.perf_counter()
    jobs = client.submit_many(tenant, items)
    bar = tqdm(total=len(jobs), desc=desc, unit="session", disable=quiet)
    done = client.wait(
        tenant, [j.job_id for j in jobs], on_progress=lambda n: bar.update(n - bar.n)
    )
    bar.close()
    seconds = time.perf_counter() - started
    failed = [j for j in done if j.state != "done"]
    if failed:
        raise InvalidInput(
            f"{len(failed)} ingest jobs failed, first: {failed[0].job_id}: {failed[0].reason}"
        )
    total = CommitStats()
    for job in done:
        total.add(CommitStats.from_counts(job.counts))
    return seconds, total
