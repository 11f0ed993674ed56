"""Readers for the input formats: session JSON, LoCoMo conversations, pre-extracted facts."""
