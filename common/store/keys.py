"""Every Redis key, built in one place: atommem:{kind}:{tenant}:{space}:..."""

from __future__ import annotations


def job(tenant: str, job_id: str) -> str:
    return f"atommem:job:{tenant}:{job_id}"


def job_payload(tenant: str, job_id: str) -> str:
    return f"atommem:jobpayload:{tenant}:{job_id}"


OPEN_JOBS = "atommem:jobs:open"
# Sorted set: open job (tenant\x1fjob_id) → when it last made progress; the sweep reads it.
JOB_PROGRESS = "atommem:jobs:progress"
# Hash: open job → how often the sweep sent it again since it last really progressed.
JOB_RESENDS = "atommem:jobs:resends"
SWEEP = "atommem:sweep"
# Jobs a tenant's listing shows, newest first: the most recent RECENT_JOBS of them.
RECENT_JOBS = 10_000


def recent_jobs(tenant: str) -> str:
    """Sorted set: job id → when the job was created."""
    return f"atommem:jobs:recent:{tenant}"


def pending(tenant: str, space: str) -> str:
    return f"atommem:pending:{tenant}:{space}"


def chunks(tenant: str, space: str, session_id: str) -> str:
    """Hash: "chunk/of" → that chunk's extracted drafts."""
    return f"atommem:chunks:{tenant}:{space}:{session_id}"


def lock(tenant: str, space: str) -> str:
    return f"atommem:lock:{tenant}:{space}"


def version(tenant: str, space: str) -> str:
    return f"atommem:version:{tenant}:{space}"


def queue_wait(queue: str) -> str:
    return f"atommem:metrics:wait:{queue}"


def api_key(digest: str) -> str:
    """An API key's record, by the SHA-256 of the key (keys are never stored)."""
    return f"atommem:apikey:{digest}"


def tenant(name: str) -> str:
    return f"atommem:tenant:{name}"


TENANTS = "atommem:tenants"


def tenant_keys(name: str) -> str:
    """Hash: key id → digest of each of the tenant's keys."""
    return f"atommem:tenantkeys:{name}"


def write_rate(tenant_name: str, window: int) -> str:
    return f"atommem:rate:{tenant_name}:{window}"


def fair_ring(lane: str) -> str:
    """List: the tenants with work waiting in a fair lane, in the order they are served."""
    return f"atommem:fairring:{lane}"


def fair_queue(tenant: str, lane: str) -> str:
    """List: the keys of one tenant's work waiting in a fair lane, oldest first."""
    return f"atommem:fairqueue:{tenant}:{lane}"


def fair_entries(tenant: str, lane: str) -> str:
    """Hash: key → the waiting entry (work offered again while it waits is not queued twice)."""
    return f"atommem:fairentries:{tenant}:{lane}"


def fair_claims(lane: str) -> str:
    """Hash: task id → the entry that task took from a fair lane and has not finished."""
    return f"atommem:fairclaims:{lane}"


def fair_claimed_at(lane: str) -> str:
    """Sorted set: task id → when it took its entry (to find claims whose task is gone)."""
    return f"atommem:fairclaimedat:{lane}"


def replies(tenant: str) -> str:
    """Sorted set: "{space}\x1f{task id}" of each stored task reply that carries the tenant's
    memory → when it expires (erasure deletes a space's replies)."""
    return f"atommem:replies:{tenant}"


FAIR_RUNNING = "atommem:fairrunning"  # hash: tenant → fair-lane steps now running, every lane


# Model budgets (common/store/coordination/budgets.py), one per endpoint: "base_url model".
MODEL_ENDPOINTS = "atommem:llm:endpoints"  # set: every endpoint that has counters


def model_budget(endpoint: str) -> str:
    """Hash: the endpoint's request and token bucket levels, when they were refilled, and the
    time a 429 told every process to hold off until."""
    return f"atommem:llm:budget:{endpoint}"


def model_leases(endpoint: str) -> str:
    """Sorted set: lease id of each call in flight → when the lease lapses (its process died)."""
    return f"atommem:llm:leases:{endpoint}"


def model_counters(endpoint: str) -> str:
    """Hash: calls, tokens, 429s, waits and wait milliseconds, re-queues of the endpoint."""
    return f"atommem:llm:counters:{endpoint}"
