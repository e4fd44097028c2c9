"""Benchmark readers: each public release format into :class:`agreement.benchmarks.items.Benchmark`."""
