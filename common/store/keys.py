"""Every Redis key, built in one place: atommem:{kind}:{tenant}:{space}:..."""

from __future__ import annotations


def job(tenant: str, job_id: str) -> str:
    return f"atommem:job:{tenant}:{job_id}"


def job_payload(tenant: str, job_id: str) -> str:
    return f"atommem:jobpayload:{tenant}:{job_id}"


OPEN_JOBS = "atommem:jobs:open"


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
