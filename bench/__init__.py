"""Benchmarks: bashrpc against the real alternatives, measured in one run."""
