"""Reconciliation, attribution, lateness analysis and the data-quality suites."""
