"""Benchmarks that drive the worker system: LoCoMo recall and scale."""
