"""Benchmark helpers: reporting of LoCoMo result files."""
