"""Report rendering, the report database, review (sign-off) and postmortem tools."""
