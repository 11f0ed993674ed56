"""The `atommem` command line: local commands, the same against a server, demo and benchmarks."""
