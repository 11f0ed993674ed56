"""Coordination state by role: jobs, per-space sequence, parked chunks, locks, versions and
queue-wait samples.

Redis holds them when a broker is configured; otherwise a SQLite journal next to the store
does, so an interrupted embedded run finds its unfinished jobs again. Functions take the
roles they use; `Coordination` carries the whole set for callers that hand it on.
"""
