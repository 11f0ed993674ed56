"""Durable storage (Qdrant) and the in-memory per-space index built from it."""
