"""Spark jobs (stream, replay) and the shared Spark/Delta plumbing (session, tables, rules)."""
