"""The warehouse and its neighbours on disk, read and written without a JVM.

The Delta commit log read as files (``commits``), the tables' names and paths
(``table_names``), the recorded event-time spec (``spec_log``), the one-writer lock
(``writer_lock``), the landing dir's survey and admission (``landing``, ``admission``) and the
group sharing of files two OS accounts write (``sharing``). It sits between the pure rules
(``reckon``) and the engines: Spark (``spark``), the audits, the reports and the workbench all
read the warehouse through it, so a report or a postmortem query needs no JVM to find a table.

Example::

    from storage import table_names as tb
    tb.table_path("warehouse", tb.EVENT_LOG)   # 'warehouse/event_log'
"""
