"""Benchmarks of polyc against its peers (see benchmarks/README.md)."""
