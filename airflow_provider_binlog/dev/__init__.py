"""Throwaway local services for the demo, the benchmarks and the test suite (not for production)."""
