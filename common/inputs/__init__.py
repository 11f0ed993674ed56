"""Readers for the input formats: AtomMem session JSON, LoCoMo conversations, pre-extracted facts."""
