"""``reckon stream``: the streaming aggregator on a landing directory or a Kafka topic.

The handler turns the flags into a ``StreamSource`` and the expected partitions, then calls
``app.pipeline.stream``; what it prints (the expected partitions, the rules it runs with,
each batch, files the stream will not read) goes to stderr, as progress. Example::

    reckon stream --landing landing --warehouse wh --available-now
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from app import pipeline
from reckon.config import Settings
from spark.batch_metrics import BatchMetrics, print_progress
from spark.sources import StreamSource
from storage.landing import MANIFEST_NAME, LandingSurvey, describe_unread, survey

__all__ = ["cmd_stream"]


def _note(text: str) -> None:
    print(f"[stream] {text}", file=sys.stderr, flush=True)


def cmd_stream(args: argparse.Namespace, settings: Settings) -> int:
    """`reckon stream`: run the aggregator on the landing directory or a Kafka topic."""
    source = StreamSource(landing=args.landing,
                          kafka_bootstrap=settings.kafka_bootstrap if args.kafka_bootstrap
                          else None, topic=settings.kafka_topic)
    if args.landing and not settings.expected_partitions:
        settings = _partitions_from_manifest(Path(args.landing), settings)

    def on_start(running: Settings) -> Callable[[BatchMetrics], None]:
        rules = running.event_time_rules()
        _note(f"{source.name} -> {running.warehouse_path}: {rules.windows.describe()} "
              f"windows, {rules.watermark.describe()}, allowed lateness "
              f"{running.allowed_lateness}, idle timeout {running.idle_timeout}")
        if not source.landing:
            return print_progress
        at_start = survey(source.landing)
        _note(at_start.describe())
        return _reporting_unread_files(source.landing, at_start)

    checkpoint = pipeline.stream(settings, source, trigger=args.trigger,
                                 change_spec=args.change_spec, note=_note, on_start=on_start)
    print(f"[stream] done; checkpoint {checkpoint}", file=sys.stderr)
    return 0


def _partitions_from_manifest(landing: Path, settings: Settings) -> Settings:
    """A generated landing dir says which partitions to wait for (``_manifest.json``'s
    ``expected_partitions``); settings unchanged when it has no manifest."""
    manifest = landing / MANIFEST_NAME
    if not manifest.is_file():
        return settings
    expected = json.loads(manifest.read_text()).get("expected_partitions") or []
    _note(f"expected partitions from {manifest}: {expected}")
    return settings.with_values({"expected_partitions": str(manifest)},
                                expected_partitions=expected)


def _reporting_unread_files(folder: str, seen: LandingSurvey) -> Callable[[BatchMetrics], None]:
    """print_progress, then any file that appeared in the landing dir since the last look and
    will not be read (storage.landing): a long-running stream names each one once."""
    reported = {name for name, _ in seen.unread}

    def on_batch(m: BatchMetrics) -> None:
        print_progress(m)
        new = tuple((name, why) for name, why in survey(folder).unread if name not in reported)
        if new:
            reported.update(name for name, _ in new)
            _note(f"landing {folder}: {describe_unread(new)}; {len(reported)} not read in all")
    return on_batch
