"""The ``reckon`` command's handlers, one thin wrapper per command: parse the arguments into
values, call one ``app.pipeline`` step (or one engine, for a command the nightly run does
not have), print the result. The engines below (``spark/``, ``audits/``, ``reports/``) return
values and never read an ``argparse.Namespace``.

The modules are imported only when their command runs (app.cli_parser's ``_lazy``), so
``reckon --help`` starts no JVM and imports no Spark:

- ``nightly``: compact, replay, audit, check, report, vacuum (the steps the DAGs run too);
- ``stream``: the streaming aggregator;
- ``review``: breaks, signoff, verify-log;
- ``keys``: the signers' ed25519 keys (init, register, list);
- ``investigate``: sql, explain, bound-whatif-curve, bound-whatif;
- ``sample``: generate (sample landing data), demo (the whole flow on it).

Example: ``reckon replay --date 2026-01-01`` runs ``app.commands.nightly.cmd_replay``,
which calls ``app.pipeline.run_replay`` for that day, as the nightly DAG does.
"""
