"""Benchmarks that drive the worker system: LoCoMo recall, scale, queue throughput, HTTP load;
their committed results are in `bench/results/` and described in `bench/README.md`."""
