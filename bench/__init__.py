"""Benchmarks: each workload against the engine a user would otherwise pick, side by side."""
