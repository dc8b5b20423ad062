"""The warehouse's event-time spec: the rules its stream windows events by, recorded once.

A warehouse is only as consistent as the rules every step applies to it. The stream records its
spec (window, slide, watermark bound, allowed lateness, idle timeout, clock skew, dedup
horizon, expected partitions) in the warehouse's ``event_time_spec`` table when it first
starts; every later step (stream restart, replay, audit, check, report, bound what-if, explain)
takes those values instead of its defaults. The code reads a spec in the names the CLI sets
(``watermark_bound``, ``allowed_lateness``); the warehouse records it by the settings' first
names (``EventTimeRules.to_record``), and a recorded spec is read in either
(``reckon.vocabulary.from_stored``), so old warehouses open unchanged. A value that was *given*
(a flag, ``RECKON_*``, the config file) and disagrees is refused, naming both; silently
replaying 60 s windows as 10 s ones would flood the audit with breaks that are not there.

A deliberate change is an explicit act (``reckon stream --change-spec``), recorded as a new
version with the batch and watermark from which it applies. Only the rules that decide *when*
a window is final may change (watermark bound and bounds per input, allowed lateness, idle
timeout, expected partitions): they change which events are late, never which window an event belongs to nor which events count,
so every day's canonical totals stay comparable. The window, the slide, the clock skew and the
dedup horizon decide totals: changing one is a new warehouse.

Example:
    >>> from reckon.config import settings_of
    >>> recorded = spec_of(settings_of(window="60s"))
    >>> resolve(settings_of(), recorded, "replay").window
    '1m'
    >>> resolve(settings_of(window="10s"), recorded, "replay")
    Traceback (most recent call last):
    ...
    reckon.errors.UsageError: replay: the warehouse's event-time spec has window=1m, but --window gives 10s: drop --window (every step takes the warehouse's spec), or stream into a new warehouse to window events differently
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reckon.config import CLEAR_ALL, WAREHOUSE_ORIGIN, Settings
from reckon.errors import UsageError
from reckon.eventtime import EventTimeRules, WatermarkPolicy
from reckon.timeutil import format_duration, parse_duration
from reckon.vocabulary import from_stored

__all__ = ["CHANGEABLE_FIELDS", "SPEC_FIELDS", "Difference", "changed_spec", "describe_change",
           "differences", "merged_bounds", "recorded_bound", "resolve", "rules_of", "spec_of",
           "unseen_bounds", "unseen_inputs", "with_spec"]

SPEC_FIELDS: tuple[str, ...] = ("window", "slide", "watermark_bound", "allowed_lateness",
                                "idle_timeout", "max_clock_skew", "dedup_horizon",
                                "expected_partitions",
                                "watermark_inputs", "watermark_bound_by_partition",
                                "watermark_bound_by_source")
# decide only when a window is final, never which window or which events: may change (after
# a change of watermark_inputs the old inputs hold the watermark where they stood until they
# time out idle: nothing closes early)
CHANGEABLE_FIELDS = frozenset({"watermark_bound", "allowed_lateness", "idle_timeout",
                               "expected_partitions",
                               "watermark_inputs", "watermark_bound_by_partition",
                               "watermark_bound_by_source"})
#: the bounds per input, recorded only when not the default: a spec without them (every
#: warehouse recorded before they existed) means one bound for every partition
_ONE_BOUND: dict[str, Any] = {"watermark_inputs": "partition",
                              "watermark_bound_by_partition": {},
                              "watermark_bound_by_source": {}}


def spec_of(settings: Settings) -> dict[str, Any]:
    """The spec ``settings`` describe, normalised (``60s`` and ``1m`` are one value), in the
    names code uses (``EventTimeRules.to_record`` is what a warehouse records)."""
    config = settings.event_time_rules().to_config()
    return {name: config[name] for name in SPEC_FIELDS if name in config}


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items())) or "{} (none)"
    if isinstance(value, list | tuple):
        return "[" + ",".join(str(v) for v in value) + "]" if value else "[] (all seen)"
    return str(value)


@dataclass(frozen=True)
class Difference:
    """One spec value the warehouse recorded and one a step was given."""

    field: str
    recorded: Any
    given: Any
    origin: str

    def describe(self) -> str:
        return (f"{self.field}={_show(self.recorded)}, but {self.origin} gives "
                f"{_show(self.given)}")


def differences(recorded: Mapping[str, Any], settings: Settings) -> list[Difference]:
    """The spec values ``settings`` were explicitly given that disagree with ``recorded``;
    defaults never disagree (they give way to the warehouse's values). A bounds map names
    bounds of some inputs: it is merged into the recorded one (``merged_bounds``), so
    ``sat=2s`` on a warehouse with ``sat=10s,http=30s`` means ``http=30s,sat=2s``."""
    given, recorded = spec_of(settings), from_stored(recorded)
    out = []
    for name in SPEC_FIELDS:
        origin = settings.origin(name)
        if origin is None or origin == WAREHOUSE_ORIGIN:
            continue
        theirs = recorded.get(name, _ONE_BOUND.get(name))
        mine = (merged_bounds(theirs or {}, getattr(settings, name)) if name in _MAPS
                else given.get(name, _ONE_BOUND.get(name)))
        if _normal(name, mine) != _normal(name, theirs):
            out.append(Difference(field=name, recorded=theirs, given=mine, origin=origin))
    return out


_MAPS = frozenset({"watermark_bound_by_partition", "watermark_bound_by_source"})


def merged_bounds(recorded: Mapping[str, str], given: Mapping[str, str]) -> dict[str, str]:
    """A recorded bounds map with the given entries: ``k=d`` sets k's bound, ``k=`` removes
    it, ``none`` (``CLEAR_ALL``) removes every recorded one first. Durations normalised.

    >>> merged_bounds({"sat": "10s", "http": "30s"}, {"sat": "2000ms"})
    {'http': '30s', 'sat': '2s'}
    >>> merged_bounds({"sat": "10s", "http": "30s"}, {"sat": ""})
    {'http': '30s'}
    >>> merged_bounds({"sat": "10s"}, {"*": "", "radar": "1s"})
    {'radar': '1s'}
    """
    out = {} if CLEAR_ALL in given else dict(recorded)
    for key, bound in given.items():
        if key == CLEAR_ALL:
            continue
        if bound == "":
            out.pop(key, None)
        else:
            out[key] = format_duration(parse_duration(bound, f"watermark bound of {key}"))
    return dict(sorted(out.items()))


def _normal(name: str, value: Any) -> Any:
    if name == "expected_partitions":
        return tuple(sorted(int(p) for p in value or ()))
    if name in _ONE_BOUND:
        return _ONE_BOUND[name] if value is None else value
    return value


def _setting_value(name: str, value: Any) -> Any:
    """A recorded spec value as the Settings field holds it."""
    if name == "slide":
        return value or ""
    if name == "expected_partitions":
        return tuple(int(p) for p in value or ())
    return value


def _spec_values(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded spec as the Settings fields hold it (the bounds per input default to one
    bound for all when the spec predates them; either key of a renamed setting is read):
    the one reading of a spec."""
    full = {**_ONE_BOUND, **from_stored(recorded)}
    return {name: _setting_value(name, full[name]) for name in SPEC_FIELDS if name in full}


def with_spec(settings: Settings, recorded: Mapping[str, Any]) -> Settings:
    """``settings`` with every spec value taken from ``recorded``, each marked as the
    warehouse's (never handed on as if a user set it: ``Settings.user_set``)."""
    values = _spec_values(recorded)
    return settings.with_values(dict.fromkeys(values, WAREHOUSE_ORIGIN), **values)


def rules_of(recorded: Mapping[str, Any] | None, base: EventTimeRules | None = None
             ) -> EventTimeRules:
    """The rules a recorded spec means (a version of ``event_time_spec``, or the
    ``rules_json`` a batch recorded), its bounds per input included; what it does not hold
    from ``base`` (the built-in defaults when None). The pure rule every reader of a
    warehouse's rules goes through (storage.spec_log reads the table).

    >>> rules = rules_of({"watermark_bound": "3s", "watermark_inputs": "source",
    ...                   "watermark_bound_by_source": {"http": "8s"}})
    >>> rules.watermark.bound((0, "http")) // 1_000_000, rules.watermark.bound((0, "sat")) // 1_000_000
    (8, 3)
    """
    base = base or Settings().event_time_rules()
    if recorded is None:
        return base
    spec = {name: value for name, value in from_stored(recorded).items() if name in SPEC_FIELDS}
    values = _spec_values({**base.to_config(), **_ONE_BOUND, **spec})
    return EventTimeRules.parse(
        window=values["window"], slide=values.get("slide") or None,
        watermark_bound=values["watermark_bound"], allowed_lateness=values["allowed_lateness"],
        idle_timeout=values["idle_timeout"], max_clock_skew=values["max_clock_skew"],
        dedup_horizon=values["dedup_horizon"],
        expected_partitions=values.get("expected_partitions", ()),
        inputs=values["watermark_inputs"],
        bound_by_partition=values["watermark_bound_by_partition"],
        bound_by_source=values["watermark_bound_by_source"])


def recorded_bound(rules_json: str, configured: int) -> int:
    """The watermark bound a batch's recorded ``rules_json`` holds (microseconds), under
    either of its names; ``configured`` when it holds none. Why: the per-batch what-if starts
    from the state a batch left, under the bound that state was kept by.

    >>> recorded_bound('{"lateness": "5s"}', 0), recorded_bound('{"window": "1m"}', 7)
    (5000000, 7)
    """
    bound = from_stored(json.loads(rules_json)).get("watermark_bound", configured)
    return parse_duration(bound, "watermark_bound") if isinstance(bound, str) else int(bound)


def resolve(settings: Settings, recorded: Mapping[str, Any] | None, step: str) -> Settings:
    """The settings a step runs with on a warehouse whose spec is ``recorded`` (None: not
    recorded yet, e.g. a replay straight from Kafka into a new warehouse). Raises UsageError
    naming both values when a given value disagrees."""
    if recorded is None:
        return settings
    diffs = differences(recorded, settings)
    if diffs:
        flags = " and ".join(sorted({d.origin for d in diffs}))
        raise UsageError(f"{step}: the warehouse's event-time spec has "
                         + "; ".join(d.describe() for d in diffs)
                         + f": drop {flags} (every step takes the warehouse's spec), or "
                         + _how_to_change(diffs))
    return with_spec(settings, recorded)


def _how_to_change(diffs: Sequence[Difference]) -> str:
    fixed = [d.field for d in diffs if d.field not in CHANGEABLE_FIELDS]
    if fixed:
        return (f"stream into a new warehouse to {_verb(fixed)} differently")
    return ("restart the stream with --change-spec to change it from its next batch on "
            "(recorded in event_time_spec)")


def _verb(fixed: Sequence[str]) -> str:
    if set(fixed) <= {"window", "slide"}:
        return "window events"
    return "apply " + ", ".join(fixed)


def changed_spec(recorded: Mapping[str, Any], settings: Settings) -> dict[str, Any]:
    """The new spec of an explicit change (``--change-spec``): ``recorded`` with the given
    values that differ. Raises UsageError when nothing changes, or a value that decides
    totals would."""
    diffs = differences(recorded, settings)
    if not diffs:
        raise UsageError("--change-spec: nothing to change: every given value equals the "
                         "warehouse's spec (give the new --watermark-bound, --allowed-lateness, "
                         "--idle-timeout, --partitions, --watermark-inputs or "
                         "--watermark-bound-by-partition/-source)")
    fixed = [d for d in diffs if d.field not in CHANGEABLE_FIELDS]
    if fixed:
        raise UsageError("--change-spec: " + "; ".join(d.describe() for d in fixed)
                         + ": only the watermark bound (and bounds per input), allowed "
                         "lateness, idle timeout and expected partitions may change in a "
                         "warehouse (they decide when a window is "
                         f"final, not what it holds); stream into a new warehouse to "
                         f"{_verb([d.field for d in fixed])} differently")
    new = {**from_stored(recorded), **{d.field: d.given for d in diffs}}
    by_source = new.get("watermark_bound_by_source") or {}
    if new.get("watermark_inputs", "partition") == "partition" and by_source:
        raise UsageError(
            "--change-spec: --watermark-inputs partition, but the warehouse's spec has "
            f"watermark_bound_by_source={_show(by_source)}, which only inputs by source use: "
            "clear them in the same change with --watermark-bound-by-source none (or remove "
            "each: " + ",".join(f"{k}=" for k in sorted(by_source)) + ")")
    return new


def describe_change(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """``watermark_bound 5s -> 2s, allowed_lateness 0s -> 5s``: what a spec version changed,
    in the names a person sets; a spec keyed by the first names and one keyed by the new ones
    read the same, so only a changed value is told.

    >>> describe_change({"lateness": "5s", "grace": "0s"},  # vocabulary: keep
    ...                 {"watermark_bound": "2s", "allowed_lateness": "0s"})
    'watermark_bound 5s -> 2s'
    """
    before, after = from_stored(before), from_stored(after)
    return ", ".join(f"{name} {_show(_normal(name, before.get(name)))} -> "
                     f"{_show(_normal(name, after.get(name)))}"
                     for name in SPEC_FIELDS
                     if _normal(name, before.get(name)) != _normal(name, after.get(name)))


def unseen_inputs(policy: WatermarkPolicy, partitions: Iterable[int], sources: Iterable[object]
                  ) -> tuple[list[str], list[int]]:
    """(sources, partitions) ``policy`` gives a bound of their own that are not among those
    seen, in the policy's order. A bound applies to the events' ``source`` field and partition
    exactly: ``Sat`` never holds back ``sat``. Nothing seen of a kind (a new warehouse): none
    of that kind is named.

    >>> policy = WatermarkPolicy(0, 60, by_source=True, source_bounds=(("htp", 5), ("http", 5)))
    >>> unseen_inputs(policy, [], ["http"])
    (['htp'], [])
    """
    seen_parts, seen_sources = set(partitions), {str(s) for s in sources}
    return ([name for name, _ in policy.source_bounds if seen_sources and name not in seen_sources],
            [p for p, _ in policy.partition_bounds if seen_parts and p not in seen_parts])


def unseen_bounds(policy: WatermarkPolicy, partitions: Iterable[int], sources: Iterable[str],
                  where: str) -> str | None:
    """One warning line naming each bound of ``policy`` for an input not among those seen
    (``unseen_inputs``; ``where`` says where they were seen), else None: a misspelt name
    leaves its source on the default bound without a word otherwise.

    >>> policy = WatermarkPolicy(0, 60, by_source=True, partition_bounds=((7, 5),),
    ...                          source_bounds=(("Sat", 5), ("http", 5)))
    >>> unseen_bounds(policy, [0, 1], ["http", "sat"], "in this warehouse")
    "warning: bounds for inputs never seen in this warehouse: source 'Sat' (seen: http, sat), partition 7 (seen: 0, 1): a misspelt name? a bound applies to the events' source and partition exactly"
    """
    partitions, sources = sorted(set(partitions)), sorted(set(sources))
    missing_sources, missing_parts = unseen_inputs(policy, partitions, sources)
    named = [f"source {name!r}" for name in missing_sources]
    if named:
        named[-1] += f" (seen: {', '.join(sources)})"
    parts = [f"partition {p}" for p in missing_parts]
    if parts:
        parts[-1] += f" (seen: {', '.join(str(p) for p in partitions)})"
    if not named + parts:
        return None
    return (f"warning: bounds for inputs never seen {where}: {', '.join(named + parts)}: a "
            "misspelt name? a bound applies to the events' source and partition exactly")
