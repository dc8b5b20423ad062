"""reckon's app layer: what a user or a scheduler runs, above the engines.

The command line (``app.cli``, the ``reckon`` command), the nightly steps the DAG calls
(``app.pipeline``), the demo, the local Airflow and its glue, notifications and lineage, and
the loading of settings from files and the environment. Nothing below imports this package
(tests/test_import_graph.py derives the layers from the folders); the engines below it are
handed frozen configs and plain values.

Example::

    from app.pipeline import run_audit   # what the DAG's audit task calls
"""
