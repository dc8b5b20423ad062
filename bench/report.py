"""BENCHMARKS.md, regenerated from bench/results/*.json and the short notes in bench/notes/
(never edited by hand). Each workload's section is its tables and a few sentences; the history
of the figures is bench/CHANGELOG.md. ``python -m bench --report-only`` regenerates it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

__all__ = ["NOTES_DIR", "read_note", "write_markdown"]

ORDER = ("stream", "freshness", "replay", "audit", "lateness", "scale", "compaction",
         "long_day", "per_source_day", "fixed_cost", "postmortem", "postmortem_day",
         "nightly_dag")

TITLES = {
    "stream": "1. Stream throughput: reckon aggregator vs Spark withWatermark + groupBy(window, key, currency)",
    "freshness": "2. Freshness: landing -> visible in provisional_totals",
    "replay": "3. Nightly replay of one day: replay_day vs Spark groupBy floor vs DuckDB",
    "audit": "4. Audit: audit_day vs DataComPy SparkSQLCompare",
    "lateness": "5. Lateness curve: vectorised vs pure-Python reference",
    "scale": "6. Scale curve: replay and audit at three sizes",
    "compaction": "7. Nightly compaction: the replay of a day in the stream's small files, "
                  "compacted",
    "long_day": "8. Long day: stream batches late in a day against the same in the morning",
    "per_source_day": "9. Bounds per source: a streamed day with a slow source, against the "
                      "best single bound",
    "fixed_cost": "10. Fixed cost: a steady 10,000-line batch of the real stream, step by step",
    "postmortem": "11. Postmortem questions: `reckon sql` as a whole command, DuckDB vs Spark",
    "postmortem_day": "12. Postmortem questions on a 20M-event day: a per-key aggregate and a "
                      "join, DuckDB vs Spark",
    "nightly_dag": "13. The nightly DAG on the demo day through a real scheduler, task by task",
}

#: One short note per workload, what dominates it: ``<name>.md`` here. The dated history of
#: each workload's figures is bench/CHANGELOG.md.
NOTES_DIR = Path(__file__).resolve().parent / "notes"


def read_note(name: str, notes_dir: Path = NOTES_DIR) -> str:
    """The workload's note as one paragraph ("" when it has none). Notes say what dominates a
    workload and why; figures belong to the tables generated from the result files, so a note
    cannot fall behind a re-recording.

    >>> read_note("no_such_workload")
    ''
    """
    path = notes_dir / f"{name}.md"
    return " ".join(path.read_text().split()) if path.is_file() else ""


_SPREAD = {"replay": (("reckon_replay_day", "the same replay"),
                      ("spark_groupby_floor", "the plain Spark floor")),
           "audit": (("reckon_audit_record_false", "the same audit"),
                     ("datacompy_spark_compare", "DataComPy"))}


def _spread(results: dict[str, dict[str, Any]]) -> str:
    """How far the timed runs of one contender lie apart, in the recorded replay and audit
    (from their result files: each contender runs several times in turns)."""
    parts = []
    for workload, contenders in _SPREAD.items():
        recorded = results.get(workload)
        if not recorded:
            continue
        spans = []
        for name, label in contenders:
            runs = recorded["results"].get(name, {}).get("wall_seconds_runs") or []
            if len(runs) > 1:
                spans.append(f"{label} took {min(runs):.1f} to {max(runs):.1f} s")
        if spans:
            parts.append(f"in the recorded {workload} run {' and '.join(spans)}")
    if not parts:
        return "Wall seconds are noisy. "
    return f"Wall seconds are noisy: {'; '.join(parts)}, in turns, on the same data. "


def _commits(results: dict[str, dict[str, Any]]) -> str:
    """The code each workload was recorded at (workloads are re-recorded one at a time)."""
    by_commit: dict[str, list[str]] = {}
    for name, r in results.items():
        label = f"`{str(r.get('git_commit'))[:12]}`" + (" with uncommitted changes"
                                                         if r.get("git_dirty") else "")
        by_commit.setdefault(label, []).append(name)
    return "; ".join(f"{label} ({', '.join(names)})" for label, names in by_commit.items())


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _cpu(x: dict[str, Any]) -> str:
    if "cpu_seconds_python" not in x:
        return "-"
    return f"{x['cpu_seconds_python']:.1f} + {x['cpu_seconds_jvm']:.1f}"


def _rows(name: str, r: dict[str, Any]) -> list[list[str]]:
    out = []
    if name == "freshness":
        for rate, x in r["results"].items():
            lat = x.get("latency_seconds", {})
            archived = x.get("archived_rows_before_the_feed")
            out.append([f"reckon stream, {int(rate):,} ev/s"
                        + (f", {archived:,} archived in the hour before" if archived else ""),
                        f"{x['files_landed']} files",
                        f"p50 {_fmt(lat.get('p50'))} / p95 {_fmt(lat.get('p95'))} / "
                        f"p99 {_fmt(lat.get('p99'))} s", "-",
                        _fmt(x.get("peak_driver_rss_mb")), f"batch median "
                        f"{_fmt(x.get('median_batch_seconds'))} s"
                        + (f", cold start {_fmt(x['cold_start_seconds'])} s"
                           if x.get("cold_start_seconds") is not None else ""), _cpu(x)])
        return out
    if name == "per_source_day":
        events = r.get("scale", {}).get("events", 0)
        for key, x in sorted(r["results"].items(), key=lambda kv: _CONFIGURATION_ORDER.index(
                kv[0]) if kv[0] in _CONFIGURATION_ORDER else len(_CONFIGURATION_ORDER)):
            conf = r.get("configurations", {}).get(key, {})
            out.append([conf.get("label", key), f"{events:,} events, {x['batches']} batches",
                        _fmt(x.get("wall_seconds")),
                        f"{events / x['wall_seconds']:,.0f} events/s" if x.get("wall_seconds")
                        else "-", _fmt(x.get("peak_driver_rss_mb")), "-", _cpu(x)])
        return out
    if name == "nightly_dag":  # the run, then its tasks in the order the DAG runs them
        from app.demo import STEP_ORDER

        size = f"{r.get('scale', {}).get('events', 0):,} events"
        run = r["results"].get("reckon_nightly_run", {})
        out.append(["nightly run (Airflow's start to end)", size, _fmt(run.get("wall_seconds")),
                    "-", "-", run.get("dag_state", "-"), "-"])
        for task in STEP_ORDER:
            x = r["results"].get(f"task {task}")
            if x:
                out.append([f"task {task}", size, _fmt(x.get("wall_seconds")), "-", "-",
                            "-", "-"])
        return out
    if name == "scale":
        for n, x in sorted(r["results"].items(), key=lambda kv: int(kv[0])):
            for part in ("replay", "audit"):
                m = x[part]
                unit = (f"{x['replay_us_per_event']} us/event" if part == "replay"
                        else f"{x['audit_us_per_row']} us/row")
                out.append([f"{part}_day", f"{int(n):,} events", _fmt(m["wall_seconds"]), unit,
                            _fmt(m["peak_driver_rss_mb"]),
                            f"JVM heap peak {_fmt(m['peak_jvm_heap_used_mb'])} MB", _cpu(m)])
        return out
    scale = r.get("scale", {})
    size = (f"{scale['events']:,} events" if "events" in scale else "")
    if name == "audit":
        size = f"{scale.get('reconciliation_rows', 0):,} rows"
    if name == "long_day":
        size = (f"{scale.get('timed_batches', 0)} batches of "
                f"{scale.get('lines_per_batch', 0):,} lines")
    if name == "fixed_cost":
        size = (f"{scale.get('batches', 0) - scale.get('warm_up_batches', 0)} steady batches of "
                f"{scale.get('lines_per_batch', 0):,} lines")
    # every other contender is compared with ours, or with the reference a workload names
    reference = r.get("settings", {}).get("reference")
    first = (r["results"][reference] if reference else
             next((x for k, x in r["results"].items() if k.startswith("reckon")),
                  next(iter(r["results"].values()))))
    for contender, x in r["results"].items():
        rate = (x.get("events_per_second") or x.get("events_per_second_per_bound")
                or x.get("rows_per_second"))
        unit = ("/bound" if "events_per_second_per_bound" in x else
                "rows/s" if "rows_per_second" in x else "")
        ratio = (("1.00 (reference)" if reference else "1.00 (ours)") if x is first else
                 f"{x['wall_seconds'] / first['wall_seconds']:.2f}x "
                 + ("the reference" if reference else "ours")
                 if first.get("wall_seconds") else "-")
        if name == "lateness" and x is not first:  # different sizes: compare per event
            size_x = f"{scale.get('reference_events', 0):,} events"
            ratio = (f"{first['events_per_second_per_bound'] / rate:.0f}x slower per event"
                     if rate else "-")
            out.append([contender, size_x, _fmt(x.get("wall_seconds")), f"{_fmt(rate)} {unit}",
                        _fmt(x.get("peak_driver_rss_mb")), ratio, _cpu(x)])
            continue
        out.append([contender, size, _fmt(x.get("wall_seconds")),
                    f"{_fmt(rate)} {unit}".strip() if rate else "-",
                    _fmt(x.get("peak_driver_rss_mb")), ratio, _cpu(x)])
    return out


#: What the product owner says 2 cores should reach (absolute figures, unlike the issue's
#: ratios): (workload, contender, what, goal, limit, higher is better, the measure).
_ABSOLUTE: tuple[tuple[str, str, str, str, float, bool], ...] = (
    ("stream", "reckon_stream", "events/s from JSON, every late event kept", ">= 200,000",
     200_000, True),
    ("replay", "reckon_replay_day", "seconds for a day of 20M events", "<= 30", 30, False),
    ("audit", "reckon_audit_record_false", "seconds per 1M (window, key, currency) rows", "<= 10", 10,
     False),
)


def _absolute_measure(workload: str, recorded: dict[str, Any], contender: str) -> float | None:
    """The contender's figure in the goal's unit. The replay and audit are prorated linearly
    to 20M events and 1M rows when recorded at another size (their fixed costs then make the
    prorated figure a poor guide: the note says at which size it was measured)."""
    x = recorded["results"].get(contender) or {}
    if workload == "stream":
        return x.get("events_per_second")
    if not x.get("wall_seconds"):
        return None
    scale = recorded.get("scale", {})
    size, unit = ((scale.get("events"), 20_000_000) if workload == "replay"
                  else (scale.get("reconciliation_rows"), 1_000_000))
    return round(x["wall_seconds"] * unit / size, 2) if size else None


def _absolute_rows(results: dict[str, dict[str, Any]]) -> list[str]:
    """Markdown rows of the absolute targets that the recorded results speak to."""
    rows = []
    for workload, contender, what, goal, limit, higher in _ABSOLUTE:
        recorded = results.get(workload)
        if not recorded:
            continue
        measured = _absolute_measure(workload, recorded, contender)
        if measured is None:
            continue
        met = measured >= limit if higher else measured <= limit
        size = recorded.get("scale", {})
        at = (f"{size['events']:,} events" if workload != "audit"
              else f"{size.get('reconciliation_rows', 0):,} rows")
        others = {name: _absolute_measure(workload, recorded, name)
                  for name in recorded["results"] if name != contender}
        known = {name: v for name, v in others.items() if v is not None}
        best = (max if higher else min)(known, key=known.__getitem__) if known else None
        beside = f"{best} {_fmt(known[best])}" if best else "-"
        rows.append(f"| {workload} | {what} | {goal} | {_fmt(measured)} | {at} | {beside} | "
                    f"{_fmt(met)} |")
    return rows


def _load(results_dir: Path) -> dict[str, dict[str, Any]]:
    results = {}
    for name in ORDER:
        f = results_dir / f"{name}.json"
        if f.is_file():
            results[name] = json.loads(f.read_text())
    return results


def write_markdown(results_dir: Path, target: Path, notes_dir: Path = NOTES_DIR) -> None:
    """Write ``target`` from the result files and the notes: read this first, machine,
    reproduce, every contender, the targets, then one section per workload.

    Example: ``write_markdown(Path("bench/results"), Path("BENCHMARKS.md"))``.
    """
    results = _load(results_dir)
    lines = ["# Benchmarks", "",
             "Generated by `python -m bench` from `bench/results/*.json` and `bench/notes/*.md`; "
             "do not edit by hand. The history of the figures is `bench/CHANGELOG.md`.", ""]
    if not results:
        lines += ["No results yet: run `make bench-quick` or `make bench`.", ""]
    else:
        lines += (_read_first(results) + _machine(results) + _results(results)
                  + _targets(results) + ["## Per workload", ""])
        for name, r in results.items():
            lines += _section(name, r, read_note(name, notes_dir))
    target.write_text("\n".join(_wrap(lines)).rstrip() + "\n")


def _wrap(lines: list[str], width: int = 100) -> list[str]:
    """Prose lines wrapped at ``width`` (Markdown renders them the same); tables, headings and
    code blocks left as they are.

    >>> _wrap(["| a long table row |", "x " * 60], 20)[:2]
    ['| a long table row |', 'x x x x x x x x x x']
    """
    out, code = [], False
    for line in lines:
        code ^= line.startswith("```")
        if code or line.startswith(("|", "#", "```")) or len(line) <= width:
            out.append(line)
            continue
        indent = "  " if line.startswith("- ") else ""
        out += textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False,
                             break_long_words=False)
    return out


def _table(header: list[str], rows: list[list[str]], right: int = 0,
           align: list[str] | None = None) -> list[str]:
    """A Markdown table and the blank line after it; the last ``right`` columns right-aligned
    (numbers), or each column as ``align`` says (``---:`` right-aligned)."""
    align = align or ["---"] * (len(header) - right) + ["---:"] * right
    return ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|",
            *("| " + " | ".join(row) + " |" for row in rows), ""]


def _read_first(results: dict[str, dict[str, Any]]) -> list[str]:
    loads = [x for r in results.values() for x in (r["load_average_before"][0],
                                                     r["load_average_after"][0])]
    full = sorted(n for n, r in results.items() if r["scale_factor"] >= 1)
    if len(full) == len(results):
        scope = "Every workload was recorded at full scale. "
    elif full:
        scope = (f"Recorded at full scale: {', '.join(full)}; the others at the scale factor "
                 "listed under Machine and versions. ")
    else:
        scope = "Only reduced-scale results are recorded (scale factors under Machine). "
    return [
        "## Read this first", "",
        f"These numbers were measured on a shared 2-core machine: the 1-minute load average at "
        f"the start and end of each workload was {min(loads):g} to {max(loads):g} (the "
        "benchmark's own previous workload counts in it; 2 means both cores busy). " + scope
        + _spread(results) + "Ratios of contenders run "
        "back to back in one process are more telling, and CPU seconds more still. Re-run "
        "`make bench` on a quiet machine before quoting any absolute figure.", ""]


def _machine(results: dict[str, dict[str, Any]]) -> list[str]:
    any_r = next(iter(results.values()))
    m, v = any_r["machine"], any_r["versions"]
    quick = sorted({(n, r["scale_factor"]) for n, r in results.items()}, key=lambda x: x[0])
    return [
        "## Machine and versions", "",
        f"- {m['cpu_count']} cores, {m['memory_gb']} GB RAM, {m['platform']}; Spark "
        f"`{any_r.get('spark_master') or 'local[2]'}`, one SparkSession for every Spark "
        "contender, shared machine (load average recorded per workload below)",
        f"- Python {v['python']}, PySpark {v['pyspark']}, Delta {v['delta-spark']}, DuckDB "
        f"{v['duckdb']}, DataComPy {v['datacompy']}, numpy {v['numpy']}; "
        f"{v.get('java') or 'java ?'}",
        "- git commit: " + _commits(results),
        f"- scale factors: {', '.join(f'{n} {s:g}' for n, s in quick)} (1 = full size)", "",
        "## Reproduce", "",
        "```", "make bench-quick            # python -m bench --quick   (1/20 scale, minutes)",
        "make bench                  # python -m bench           (full scale)",
        "python -m bench --only replay audit --scale 0.25",
        "RECKON_PROFILE=1 python -m bench --only stream   # per-step seconds of every batch",
        "python -m bench --report-only                    # this file, from the results",
        "```", ""]


_COLUMNS = ["contender", "size", "wall s", "throughput", "peak driver RSS MB", "vs ours",
            "CPU s (python + JVM)"]
_ALIGN = ["---", "---", "---:", "---:", "---:", "---", "---:"]


def _results(results: dict[str, dict[str, Any]]) -> list[str]:
    rows = [[name, *row] for name, r in results.items() for row in _rows(name, r)]
    return ["## Results", "", *_table(["workload", *_COLUMNS], rows, align=["---", *_ALIGN]),
            "Peak driver RSS = this Python process + the Spark JVM it starts (psutil, "
            "sampled every 0.25 s); the JVM heap in use is in each result file. CPU seconds "
            "(psutil, this process and the JVM) are far less inflated by other work on a "
            "shared machine than wall seconds: compare contenders on both.", ""]


def _targets(results: dict[str, dict[str, Any]]) -> list[str]:
    rows = [[name, t["target"], t["goal"], _fmt(t["measured"]), _fmt(t["met"])]
            for name, r in results.items() for t in r.get("targets", [])]
    lines = ["## Targets", "", *_table(["workload", "target", "goal", "measured", "met"], rows,
                                       align=["---", "---", "---", "---:", "---"])]
    absolute = _absolute_rows(results)
    if absolute:
        lines += ["## Absolute targets: what 2 cores should reach", "",
                  "Set by the product, not relative to a baseline. Replay and audit figures "
                  "are prorated linearly to the goal's size when recorded at another size; "
                  "the fastest other contender of the same run is shown in the same unit.", "",
                  "| workload | target | goal | measured | recorded at | fastest other "
                  "contender | met |", "|---|---|---|---:|---|---|---|", *absolute, ""]
    return lines


def _section(name: str, r: dict[str, Any], note: str) -> list[str]:
    """One workload: when and how it ran, its contenders, its profile as tables, the note."""
    lines = [f"### {TITLES[name]}", "",
             f"Scale factor {r['scale_factor']:g}; load average before "
             f"{r['load_average_before']}, after {r['load_average_after']}; "
             f"{r['total_seconds']} s including data preparation; started "
             f"{r['started_at'][:19]}Z.", "", *_table(_COLUMNS, _rows(name, r), align=_ALIGN)]
    ratios = r.get("ratios") or {}
    if ratios:
        lines += _table(["ratio", "value"], [[k, _fmt(v)] for k, v in ratios.items()], 1)
    if name == "stream":
        lines += _stream_profile(r)
    if name == "per_source_day":
        lines += _per_source_tables(r)
    if name == "long_day":
        lines += _long_day_tables(r)
    if name == "fixed_cost":
        lines += _fixed_cost_tables(r)
    for key, value in (r.get("profile") or {}).items():
        if key.endswith("_timeline_seconds"):
            what = key.removesuffix("_timeline_seconds")
            lines += _table([f"{what}: step (between Delta commits)", "seconds"],
                            [[k, f"{v:.1f}"] for k, v in value.items()], 1)
    if note:
        lines += [note, ""]
    return lines


def _stream_profile(r: dict[str, Any]) -> list[str]:
    """Where the aggregator's time goes, the trigger sweep, and what each kept of late events."""
    p = r.get("profile", {})
    total = p.get("reckon_batch_seconds_total") or 0
    native = r["results"].get("spark_native_watermark", {})
    ours = r["results"].get("reckon_stream", {})
    lines = []
    if total:
        lines += _table([f"step (BatchMetrics, {ours.get('batches')} batches)", "seconds",
                         "share of the batches' time"],
                        [[k, f"{v:.1f}", f"{v / total:.0%}"]
                         for k, v in p.get("reckon_step_seconds_total", {}).items()], 2)
        lines += [f"{total:.1f} s in batches, {p.get('reckon_outside_batches_seconds')} s "
                  "outside them; a batch's table writes run concurrently, so the steps add up "
                  "to more.", ""]
    lines += _sweep_rows(p)
    lines += [f"Late events: reckon kept {ours.get('late_events_kept'):,} in late_events; "
              f"Spark's query dropped {native.get('late_events_dropped'):,} valid deliveries "
              f"as late (and still held {native.get('events_left_in_state_unemitted'):,} in "
              "state, never emitted in append mode when the input ends).", ""]
    return lines


def _sweep_rows(profile: dict[str, Any]) -> list[str]:
    """The trigger-size sweep of the stream workload as a table (nothing when the result was
    recorded before the sweep existed): same data, both contenders at each size."""
    sweep = profile.get("trigger_sweep") or []
    if not sweep:
        return []
    return _table(["lines a trigger", "batches", "reckon events/s", "native events/s",
                   "ratio", "late events kept"],
                  [[f"{pt['lines_per_trigger']:,}", str(pt["batches"]),
                    f"{pt['reckon_events_per_second']:,}", f"{pt['native_events_per_second']:,}",
                    f"{pt['ratio']:.2f}x", f"{pt['reckon_late_events_kept']:,}"]
                   for pt in sweep], 6)


def _in_step_order(steps: Any) -> list[str]:
    """Step names in the order a batch runs them (the result files sort their keys).

    >>> _in_step_order({"progress", "restore", "compact"})
    ['restore', 'progress', 'compact']
    """
    from bench.steady import STEP_ORDER

    known = [s for s in STEP_ORDER if s in steps]
    return known + sorted(set(steps) - set(known))


def _long_day_tables(r: dict[str, Any]) -> list[str]:
    """Per run of the long day: its steady batches (commit to commit and inside
    foreachBatch), how they judged duplicates and the dashboard read; then the median of each
    step, side by side. Nothing for a result recorded before the workload ran the real
    stream (no per-step medians in it)."""
    runs = {k: x for k, x in r["results"].items() if "median_step_seconds" in x}
    if not runs:
        return []
    lines = _table(["run", "steady batches", "median batch s (commit to commit)",
                    "median s in foreachBatch", "median CPU s a batch (Python + JVM)",
                    "duplicates judged by",
                    "dashboard read s (median; first)",
                    "rows shown", "windows read"],
                   [[k, str(x["batches"]), _fmt(x["median_commit_interval_seconds"]),
                     _fmt(x["median_batch_seconds"]),
                     _fmt(x.get("median_cpu_seconds_per_batch")),
                     ", ".join(f"{by} {n}" for by, n in x["dedup_by"].items()),
                     f"{_fmt(x['dashboard_read_seconds'])}; "
                     f"{_fmt(x.get('dashboard_first_read_seconds'))}", _fmt(x["dashboard_rows"]),
                     _fmt(x["dashboard_windows"])] for k, x in runs.items()], 7)
    steps = _in_step_order({s for x in runs.values() for s in x["median_step_seconds"]})
    return lines + _table(["step (median s of a steady batch)", *runs],
                          [[s, *(_fmt(x["median_step_seconds"].get(s)) for x in runs.values())]
                           for s in steps], len(runs))


def _fixed_cost_tables(r: dict[str, Any]) -> list[str]:
    """Where a steady batch's seconds go: the median of each step, and the batch's medians
    commit to commit and inside foreachBatch (the steps overlap: the writes run together)."""
    x: dict[str, Any] = next(iter(r["results"].values()), {})
    steps = x.get("median_step_seconds") or {}
    if not steps:
        return []
    inside, whole = x.get("median_batch_seconds"), x.get("median_commit_interval_seconds")
    rows = [[s, _fmt(steps[s]), f"{steps[s] / inside:.0%}" if inside else "-"]
            for s in _in_step_order(steps)]
    rows += [["in foreachBatch (the steps, the writes overlapping)", _fmt(inside), "100%"],
             ["commit to commit (Spark's own part included)", _fmt(whole),
              f"{whole / inside:.0%}" if inside and whole else "-"],
             ["CPU seconds commit to commit (Python + JVM, on 2 cores)",
              _fmt(x.get("median_cpu_seconds_per_batch")), "-"]]
    return _table([f"step (median of {x.get('batches')} steady batches)", "seconds",
                   "of the batch in foreachBatch"], rows, 2)


#: The per-source day's streamed configurations, in the order its tables list them.
_CONFIGURATION_ORDER = ("per_source", "best_single", "single_as_early",
                        "best_single_by_partition")

#: The single bounds of the per-source day's sweeps shown in BENCHMARKS.md (the result file
#: has every one).
_SWEEP_SHOWN = (0, 5, 8, 9, 10, 11, 12, 15, 20, 30, 40, 50, 60)
_UNIT_SHOWN = (0, 5, 10, 12, 13, 14, 15, 16, 20, 30)


def _pct(x: dict[str, Any] | None) -> str:
    return "-" if not x else f"{x['completeness']:.4%}"


def _lat(x: dict[str, Any] | None) -> str:
    return "-" if not x or x.get("avg_emit_latency_seconds") is None \
        else f"{x['avg_emit_latency_seconds']:.2f}"


def _per_source_tables(r: dict[str, Any]) -> list[str]:
    """The per-source day: what each stream counted and when it emitted, the single-bound
    sweep per micro-batch, the same claim on other seeds, and the other scenario."""
    conf = dict(sorted((r.get("configurations") or {}).items(),
                       key=lambda kv: _CONFIGURATION_ORDER.index(kv[0])
                       if kv[0] in _CONFIGURATION_ORDER else len(_CONFIGURATION_ORDER)))
    checks = r.get("checks", {})
    rows = []
    for c in conf.values():
        x = c.get("streamed") or c.get("replayed_per_batch") or c.get("pure_per_batch") or {}
        how = ("streamed" if c.get("streamed") else
               "replayed from the per-source stream's batches" if c.get("replayed_per_batch")
               else "pure, per micro-batch")
        emitted = (f"{x['windows_emitted']} of {x['windows']}" if "windows_emitted" in x
                   else "-")
        rows.append([c["label"], how, _pct(x), _fmt(x.get("late_pairs")), _lat(x), emitted,
                     _pct(c.get("pure_per_event")), _lat(c.get("pure_per_event"))])
    lines = _table(["configuration", "measured", "completeness", "late pairs",
                    "avg emit latency s", "windows emitted", "per event: completeness",
                    "per event: avg emit latency s"], rows,
                   align=["---", "---", "---:", "---:", "---:", "---:", "---:", "---:"])
    if checks:
        lines += ["Checks: " + "; ".join(f"{k.replace('_', ' ')}: {_fmt(bool(v))}"
                                         for k, v in checks.items()) + ".", ""]
    sweep = {(x["inputs"], x["bound_seconds"]): x for x in r.get("sweep_per_batch", [])}
    if sweep:
        lines += _table(["one bound (s), per micro-batch, pure", "inputs by source",
                         "avg emit latency s", "inputs by partition", "avg emit latency s"],
                        [[str(b), _pct(sweep.get(("source", b))), _lat(sweep.get(("source", b))),
                          _pct(sweep.get(("partition", b))),
                          _lat(sweep.get(("partition", b)))]
                         for b in _SWEEP_SHOWN if ("source", b) in sweep], 4)
    unit = r.get("unit_sweep_per_batch") or []
    if unit:
        lines += _table([f"{unit[0]['unit']}'s bound (s), the others as recommended, per "
                         "micro-batch, pure", "completeness", "avg emit latency s"],
                        [[str(x["bound_seconds"]), _pct(x), _lat(x)] for x in unit
                         if x["bound_seconds"] in _UNIT_SHOWN], 2)
    seeds = r.get("other_seeds_pure_per_batch") or []
    if seeds:
        lines += _table(["seed (pure, per micro-batch)", "bounds per source", "completeness",
                         "avg emit latency s", "best single bound", "completeness",
                         "avg emit latency s"],
                        [[str(x["seed"]), x["per_source"]["label"], _pct(x["per_source"]),
                          _lat(x["per_source"]),
                          (x["best_single"] or {}).get("label", "none reaches the target"),
                          _pct(x["best_single"]), _lat(x["best_single"])] for x in seeds],
                        align=["---:", "---", "---:", "---:", "---", "---:", "---:"])
    for name, other in (r.get("other_scenarios_pure") or {}).items():
        lines += _table([f"{name} (pure, per micro-batch)", "completeness",
                         "avg emit latency s"],
                        [[c["label"], _pct(c["pure_per_batch"]), _lat(c["pure_per_batch"])]
                         for c in other["configurations"].values()], 2)
    return lines
