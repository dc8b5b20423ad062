"""BENCHMARKS.md, regenerated from bench/results/*.json (never edited by hand: the notes on
what dominates each workload live in ``NOTES`` here, next to the code that measured them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["NOTES", "write_markdown"]

ORDER = ("stream", "freshness", "replay", "audit", "lateness", "scale", "compaction",
         "long_day")

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
}

#: What dominates each workload, measured (see the profile block of each result file). The
#: separate experiments quoted here ran on the --quick data (1M-event day) in their own
#: SparkSession on the same shared machine (1-minute load 9-16), so read them as ratios.
NOTES: dict[str, str] = {
    "stream": (
        "Every micro-batch makes up to five Delta commits (quarantine, event_log, late_events, "
        "one MERGE into provisional_totals that also moves window statuses, watermark_progress) "
        "plus a bounded read of event_log for de-duplication; Spark's native query makes one "
        "state-store commit and one Delta append. Full scale, 2026-11-23 (2,019,837 lines in "
        "202 files, 10 files = 100,000 lines per trigger for both), in the run recorded that day: "
        "reckon 363.0 s, 21 batches, median 15.1 s; native 77.8 s, 3.7 s a batch (0.214x). "
        "Critical path of a steady batch (Spark job timeline): parse + validate + the "
        "per-partition summary 2.6-4.3 s, the de-duplication against the last hour of "
        "event_log (600K+ rows) and the classification 2.4-3.5 s, then the MERGE 7.4-10.6 s "
        "while the event_log append (3.7-6.0 s), the late_events append and the quarantine "
        "append run next to it, then the progress row 0.6-0.9 s. The MERGE is ~19 Spark jobs: "
        "computing its source (this batch's sums and the windows the watermark closes, read "
        "back from the target) 2.4 s, the touched-files join and the rewrite ~2 s, then ~14 "
        "short Delta bookkeeping jobs (0.02-0.45 s each) after the others have finished. With "
        "5,000 lines a batch (--quick) a batch takes ~11 s and with 100,000 ~17 s: about 10 s "
        "of each batch is fixed, and the remaining 60-70 us an event (2 cores) is parsing and "
        "validation (100K lines: reading and splitting 0.69 s, from_json 0.8 s, the strict "
        "checks 0.3-0.5 s, caching 0.65 s), the de-duplication join and the event_log write, "
        "against ~16 us an event for the native query, which keeps nothing but the sums. The "
        "ratio is therefore ~0.2x at both batch sizes, and 0.8x is out of reach while every "
        "delivery is archived and de-duplicated in the batch that receives it. Changed: a "
        "batch generates ~175 classes (its own stages, Delta's MERGE and commits) and Spark's "
        "code cache held 100, so every batch compiled all of them again (1.8-2.7 s of Janino a "
        "batch, and fresh classes start cold in the JIT); with a cache of 2,000 a steady batch "
        "compiles 26-37 (0.8-1.0 s; what is left are stages with this batch's id, watermark or "
        "window range as literals). Full scale before and after, native in the same run each "
        "time: 385.6 s -> 363.0 s, JVM CPU 680 -> 596 s, 0.196x -> 0.214x (native 75.4 s, "
        "77.8 s). Tried at full scale (4 batches of 100K, 103.8 s as is): no Delta checksum "
        "files (102.3 s, noise); MERGE without materialising its source (fails with "
        "DELTA_MERGE_SOURCE_CACHED_DURING_EXECUTION, since the batch's concurrent writes cache "
        "DataFrames); looking up only the batch's ids in the hour of event_log (a semi-join "
        "before the grouping: 110.5 s, noise, not kept). 2026-11-24: deletion vectors on "
        "provisional_totals, so that the MERGE marks replaced rows instead of rewriting their "
        "files (6 batches of 100K, one after the other: 119.1 s vs 120.0 s as is, MERGE "
        "6.6-9.8 s vs 6.4-9.5 s a batch): no gain, because each MERGE changes most rows of "
        "the files it touches (the previous batch's windows all close). Earlier changes, on "
        "the --quick data, "
        "both contenders in one run each time: batch marks instead of Delta's txnAppId (which "
        "reconstructed the table state on every write): 474.5 s -> 281.0 s, 0.093x -> 0.158x "
        "native; then the four table writes of a batch run concurrently, each idempotent by "
        "its own mark, with the progress row after all of them: 281.0 s -> 236.9 s, 0.158x -> "
        "0.186x (native 44.5 s and 44.2 s in the two runs). Since the writes overlap, the "
        "per-step seconds above add up to more "
        "than the time in batches. 2026-11-24, afternoon, the same code re-recorded on a "
        "quieter machine: reckon 267.0 s (7,565 events/s, batch median 10.7 s) against native "
        "63.8 s (31,650 events/s), 0.239x. The trigger sweep, new in this run, shows the fixed "
        "cost at work: with 500,000 lines a trigger the ratio is 0.35x (18,038 against 52,310 "
        "events/s), with the whole landing dir in one batch 0.47x (26,219 against 56,335; one "
        "batch has no watermark before it, so nothing is late there). The product's absolute "
        "goal, 200,000 events/s from JSON on 2 cores, was beyond Spark itself in that run: "
        "its own query, which validates little and archives nothing, reached ~56,000 "
        "events/s with one 2M-line batch (~136,000 on the quiet machine, below). Measured alone, the two bigger triggers took "
        "154.1 s / 45.4 s (500K) and 105.6 s / 35.1 s (2M) earlier the same afternoon. "
        "2026-11-24, evening, after a reboot left the machine quiet: a profile of warm "
        "100K-line batches (Java Flight Recorder, 5,098 samples over three 600K-event runs) "
        "put 15.5% of the JVM's samples in the in-memory cache's compression statistics (its "
        "dictionary and run-length encoders probe a boxed hash map with every unique "
        "payload), ~6% in Spark's code generation stripping comments from generated code "
        "with regexes, ~6% in Janino, ~5% in planning, 8.7% in Delta's driver-side work, 5% "
        "in Java serialization of tasks, 7% in JSON parsing and 6.6% in Parquet writing. A "
        "warm batch is ~32 Spark jobs, 19 of them the MERGE (materialising its source 8, "
        "scanning files for matches 7 with two snapshot computations, the rewrite 4). "
        "Changed: persisted frames are cached uncompressed "
        "(spark.sql.inMemoryColumnarStorage.compressed = false: compression statistics 15.5% "
        "-> 3.3% of the samples), and the regexes over the whole line (blank line, the "
        "one-brace fast path, nested values, the reader's BOM and CR strips) run only where a "
        "plain scan says they can match; alternating with the old code in one process, 3 warm "
        "rounds of 600K events each: median 33.8 -> 31.7 s, JVM CPU 51.7 -> 46.0 s. Tried, "
        "not kept: the event_log write started before the classification count (warm batches "
        "4.6-6.4 s against 4.4-4.9 s: on 2 cores the overlap only shares the CPU); the "
        "MERGE's source materialised in memory rather than on disk, without its repartition "
        "before the write (32.3 vs 32.4 s, noise); the upsert as a bounded read of "
        "provisional_totals, a full outer join with the batch's sums and a replaceWhere of "
        "the same window range instead of the MERGE (identical rows; 33.5 vs 32.7 s, JVM CPU "
        "49.9 vs 48.8 s): Delta's MERGE machinery is not what costs, the bounded read, join "
        "and rewrite are; adaptive query execution off, so a batch's shuffles are not re-planned "
        "stage by stage (31.5 vs 31.9 s, noise). Two shuffle partitions instead of the "
        "default four (one wave of tasks on 2 cores): the stream 31.1 vs 33.4 s (JVM CPU 45.8 "
        "vs 50.0 s) and the 20M day's audit 7.15 vs 7.81 s, but its replay 23.1 vs 20.4 s "
        "(medians of 3 warm runs in turns, same rows); one setting serves every job, so it "
        "stays at four; letting adaptive execution coalesce small shuffles by size instead "
        "(coalescePartitions.parallelismFirst = false) does not reproduce the stream's gain "
        "(34.1 vs 33.1 s), nor does writing a batch's event_log as two files instead of four "
        "(32.2 vs 32.6 s). Recorded "
        "at this code: reckon 140.0 s (14,432 events/s, batch median 5.6 s) against native "
        "35.6 s (56,793 events/s), 0.254x; 500K lines a trigger 35,518 against 105,469 events/s "
        "(0.34x), the whole landing dir in one batch 58,060 against 135,879 (0.43x). Both "
        "contenders ran about twice as fast as in the afternoon's recording, which the shared "
        "machine had slowed; the ratios barely moved. So Spark's own query does reach "
        "~136,000 events/s here with one 2M-line batch (the afternoon's ~56,000 was the "
        "machine), still short of the 200,000 goal; ours reaches 58,000 with every delivery "
        "validated, archived and de-duplicated, and ~14,000 at 100K lines a trigger, where "
        "~32 jobs and five commits a batch are the cost."
        " 2026-11-24, night, the whole benchmark re-run at the code after a review round (a "
        "line's own arrival time checked against its transport's, one more boolean column in "
        "the parse; a query's first batch may inherit the watermark of another query; the de-"
        "duplication read no longer filters on batch numbers, which selects the same rows in "
        "one query): reckon 153.3 s (13,179 events/s, batch median 6.0 s) against native 36.0"
        " s (56,138), 0.235x; JVM CPU 258 s against 52 s. Against the previous recording (237"
        " s against 53 s) every step took 8-12% longer, the MERGE and the single-row progress"
        " write, which the round did not touch, as much as the parse (+3%), so read it as "
        "run-to-run variance; the replay moved as much with no change in its path. Triggers "
        "of 500K lines: 32,968 against 85,441 (0.39x); the whole landing dir in one batch: "
        "51,049 against 142,896 (0.36x)."
        " 2026-11-24, late night, re-recorded with the whole benchmark after a correctness "
        "fix: a Delta write re-caches every cached plan that reads the table it writes, so "
        "once a batch's event_log append committed, the next use of its persisted de-"
        "duplicated rows computed them again against an event_log that held the batch's own "
        "rows, and a MERGE or late_events write that started after that commit found every "
        "event a duplicate of itself (a race the concurrent writes rarely lose; a test now "
        "forces it). The de-duplication now reads event_log at the version the batch started "
        "with, taken from the log's file names (no Spark job); a read pinned at the newest "
        "version uses the snapshot Delta already holds: alternating with an unpinned read "
        "after an append, 4 rounds each, the same 5 jobs and 0.75-0.96 s against 0.74-1.39 s."
        " Batch marks are read from the commit files too (Delta's history() ran a job per "
        "look). Recorded: reckon 150.4 s (13,432 events/s) against native 40.2 s (50,228), "
        "0.267x; JVM CPU 251 s against 58 s. Steady batches: parse 1.3-1.8 s, de-duplication "
        "and classification 1.0-1.3 s, then the MERGE 2.7-4.5 s beside the event_log append "
        "(1.0-2.2 s) and late_events (0.8-1.6 s), the progress row 0.3-0.4 s."
        " 2026-11-25. The de-duplication grouped every event_id that arrived within the "
        "horizon (1 h) and joined the batch to the result: every batch shuffled rate x 3,600 "
        "ids, 3.6M at 1,000 events/s, however few it brought. This workload never showed it, "
        "since its event_log starts empty and its 100K-line batches dwarf the horizon for "
        "most of the run. Now the horizon is semi-joined with the batch's own ids first (a "
        "broadcast while they are few), so only the horizon's event_id and arrival_time "
        "columns are scanned and only the matches are grouped; same flags, same tables (the "
        "reference tests). Measured with BatchProcessor batches arriving just after an "
        "archived hour of event_log, old and new code in turns, warm batches: 3.6M archived "
        "rows, 5,000-line batches: de-duplication and classification 2.8-3.9 s -> 0.8-1.3 s, "
        "the batch 6.9-9.3 s -> 4.6-6.7 s; 18M archived rows (5,000 events/s), 25,000-line "
        "batches: 11.9-12.7 s -> 2.1-2.9 s, the batch 17.2-18.8 s -> 5.9-8.4 s; 1M archived "
        "rows, 100K-line batches (this workload's shape): 1.5-1.8 s -> 1.2-1.5 s, the batch "
        "unchanged within noise. The freshness workload now starts on such an archived hour "
        "(see there). Recorded at this code: reckon 154.1 s (13,107 events/s) against native "
        "38.8 s (52,017), 0.252x; JVM CPU 254 s against 55 s; steady batches parse 1.1-1.9 s,"
        " de-duplication and classification 0.75-1.2 s, the MERGE 2.5-3.3 s beside event_log "
        "(0.9-1.3 s) and late_events (0.7-1.5 s), the progress row 0.3-0.4 s. Triggers of "
        "500K lines: 32,910 against 97,789 events/s (0.34x); the whole landing dir in one "
        "batch: 49,143 against 116,747 (0.42x)."
        " 2026-11-25, later. A second cost this workload's 21 batches never reach: a MERGE "
        "rewrites every row of each file it touches, and its output mixes the windows it "
        "updated with every other row of the files it read, so the day's FINAL windows ride "
        "along into the next batch's touched file, and the next (Delta's numTargetRowsCopied "
        "grew by 500 rows every two 5,000-line batches of 500 keys, and never fell). Measured"
        " with BatchProcessor batches against a provisional_totals day of 2M rows whose file "
        "the MERGE touches: the MERGE copied 2.0M rows a batch and took 8.7-11.8 s (batches "
        "10.6-14.2 s). Deletion vectors stop the copying (MERGE 3.1-4.4 s) but cost 0.7-1.5 s"
        " a batch early in the day and leave a file per batch behind (10,000 live files of a "
        "day: MERGE 6.1-8.8 s against 2.6-3.5 s for 40). Instead, every "
        "event_log_compact_every batches the stream now rewrites the watermark's day of "
        "provisional_totals with the windows no later MERGE can read (those starting before "
        "the batch's lowest MERGE bound, which only rises) in a file of their own, the rest "
        "after it (one dataChange = false commit: no change-feed rows, rows unchanged; "
        "skipped when no file holds both). In the same run, the batch after it: the MERGE "
        "copied 500-1,500 rows and took 1.9-2.1 s, batches 3.6-4.2 s; the rewrite itself 8.2 "
        "s, once in 50 batches by default; it also bounds the day's live files."
        " Workload 8 (long day) now measures the same effect with the benchmark's own data "
        "and entry point, in turns in one run. 2026-11-25, later. An amount sent as a JSON "
        "number reached the parse's text field through a double (1.000000000000000001 read "
        "\"1.0\" and was booked as 1.00); such lines are now parsed a second time with the "
        "amount as a 20-place decimal and quarantined when the two differ. The second parse "
        "runs only on lines without a compact string amount (no '\"amount\":\"'), so this "
        "workload's lines, all strings, pay one substring test each: parsing 490,000 of its "
        "lines to a no-op sink, old and new code in separate processes in turns, 3 rounds of "
        "3 warm runs each, took 3.72-4.76 s before and 3.66-4.60 s after (medians 3.94 and "
        "3.93 s), no difference the machine can resolve; the recorded figures stand. "
        "2026-11-25, afternoon. A Java Flight Recorder profile of the parse alone (1M of "
        "this workload's lines to a no-op sink) put a third of its samples in the self time of "
        "one generated method: the parse's ~30 checks over one JSON struct had fused into a "
        "whole-stage method over 8,000 bytes of bytecode, which HotSpot never JIT-compiles, "
        "so it ran in the bytecode interpreter. The session now sets "
        "spark.sql.codegen.hugeMethodLimit = 8000 (Spark's documented setting for HotSpot), "
        "so Spark splits such a stage instead: the parse took 12.9 s before and 8.2 s after "
        "(warm runs, separate processes; -XX:-DontCompileHugeMethods gave the same, 7.8 s, "
        "but needs JVM options on every executor), a 1M-line batch through BatchProcessor "
        "25.5 s against 20.6 s. The replay and audit of a 5M-event day, alternating the "
        "setting in one process, did not move (replay 10.3-11.2 against 10.9-11.6 s, audit "
        "9.1-9.5 against 9.0-9.6 s): their stages are smaller. The next profile put a "
        "quarter of the samples in instr, which steps through a line a character at a time: "
        "the '\\r' and '}' tests over the whole line and the per-field tests are now byte "
        "scans (contains, endswith), and length and trim run only behind exact cheaper gates "
        "(octet_length, a leading space): 7.1 against 6.4 s for the 1M lines, old and new "
        "code alternating in one process, with identical output rows over 6,092 hostile and "
        "mutated lines. Building the parse's columns was ~4,500 py4j calls (0.4-0.6 s of "
        "driver time before each batch's first job, on a busy machine); they are now built "
        "once per rule set and JVM, like each table's conforming casts: a batch makes 4,300 "
        "py4j calls instead of 11,200. With 100,000-line batches that shows only as noise "
        "(steady batches of the old and new code in separate processes in turns: medians "
        "7.07 and 6.78 s against 6.93 and 6.79 s, walls 80.2 and 76.4 s against 75.2 and "
        "75.0 s), because such a batch is fixed cost. A Spark job timeline of one (6.9 s, "
        "from the UI's REST API): 0.4 s before its first job, the parse and summary 1.1 s, "
        "the quarantine append 0.3 s, event_log's file listing for the de-duplication 0.4 s, "
        "de-duplication and classification 0.9 s, then the MERGE chain 3.0 s (the file "
        "listing and read of provisional_totals for the windows that close 1.0 s, "
        "materialising its source 0.3 s, finding the touched files 0.4 s, the rewrite 0.5 s, "
        "its commit 0.3 s) beside the event_log and late_events appends, then the progress "
        "row 0.1 s; ~1.5 s of the batch is driver time between jobs (planning, Delta's log "
        "reads and commits). Recorded at this code: reckon 156.1 s (12,941 events/s, batch "
        "median 5.9 s) against native 40.7 s (49,669), 0.261x (0.252x before); JVM CPU 268 "
        "s against 59 s; steady batches parse 0.4-1.4 s (median 0.97), de-duplication and "
        "classification 0.55-1.05 s, the MERGE 2.8-3.7 s (median 3.0). The larger triggers, "
        "where the per-event cost counts: 500K lines 37,908 against 93,915 events/s (0.40x, "
        "0.34x before), the whole landing dir in one batch 57,082 against 121,472 (0.47x, "
        "0.42x before). "
        " 2026-11-26, money per currency: the stream groups by (window, key, currency) and the "
        "landing holds five currencies (merchants in one, two or three). Re-recorded on this "
        "machine, where every contender ran slower than two days before (native 60.5 s "
        "against 40.7 s for the same 2M lines): reckon 225.2 s, native 60.5 s, 0.27x (0.26x "
        "before): the ratio did not move with the grain."),
    "compaction": (
        "2026-11-24, evening. The stream commits every micro-batch, and every commit adds a file per "
        "task to each table it writes, so the nightly jobs read a day in thousands of small "
        "files; the replay's and audit's recorded figures above use a day built in large "
        "files, which is what the nightly DAG's compact task, run before the replay, now "
        "leaves. This workload lays the 1M-event bench day out as a stream fed 1,000 events/s "
        "with a 5 s trigger would (800 files of 1,250 rows, each a contiguous slice of arrival "
        "time, built once), then in turns: the replay on a fresh copy of that layout, the "
        "nightly compaction of the day (spark/compaction.py: Delta OPTIMIZE of that day's "
        "partitions only, 128 MB files), and the replay of the compacted day. Each timed step "
        "starts with the process's Delta log cache dropped, as each nightly task is a fresh "
        "process that reads the logs from storage; without that, the replay that ran right "
        "after another step's writes found the tables' state in memory and looked 2 s faster at "
        "the smoke scale whatever the layout. Three full runs that evening: 11.0 vs 8.4 s "
        "(1.31x; compaction plus the compacted replay 1.21x of the small-file replay), 12.6 "
        "vs 7.6 s (1.65x; 1.00x), and the recorded one, at the final code: replay 11.5 s on "
        "800 files (runs 14.4, 11.0, 11.5 s) against 8.3 s compacted (8.3, 8.2, 8.4 s; "
        "1.39x; JVM CPU 19.5 vs 13.6 s), the compaction 4.6 s, compaction plus replay 1.12x. "
        "So on its first night a day's compaction costs about what it saves the replay, "
        "and every later reader of the day (the lookback re-run, the audit's late "
        "attribution, the lateness analysis, postmortem queries) reads one file. In a separate script, the same day in 4,000 files "
        "of 250 rows (not arrival-ordered) replayed in 14.9 s against 5.3 s compacted, the "
        "compaction 8.0 s: the cost grows with the number of files, and a real day at "
        "1,000 events/s with a 5 s trigger is ~70,000 files. Tried, not kept: compacting "
        "into 8 MB files, or 128 MB files with 8 MB row groups, so that a small day is still "
        "read by more than one task (replay medians 5.7 and 5.8 s against 6.1 s, within "
        "noise). The stream itself pays for small files too, every batch: its de-duplication "
        "reads the last hour of event_log, and the same 42,118 rows of an hour read and "
        "grouped by event_id took 0.34, 1.11 and 3.49 s in 80, 720 and 2,880 files (medians "
        "of 3 in turns; 2,880 is an hour of a 5 s trigger at 4 files a batch). The benchmark "
        "stream (21 batches of 100,000 lines) never gets there, a day-long stream with a "
        "short trigger does. Delta's auto compaction (table property "
        "delta.autoOptimize.autoCompact) keeps a partition near 50 files (120 appends of 4 "
        "files: at most 33 live files, 10 OPTIMIZE commits, the appends that triggered one "
        "took up to 1-3 s), but its commit runs in the event_log write's thread and picks up "
        "the batch mark the concurrent MERGE sets session-wide, so event_log's history showed "
        "OPTIMIZE commits marked as batches of provisional_totals: harmless to idempotency "
        "(a mark names its table) but a false audit trail, so it is not enabled. Instead "
        "the stream compacts event_log's current days itself, every event_log_compact_every "
        "batches (default 50), between a batch's writes and its progress row, when no mark "
        "is set (spark.compaction.compact_recent_event_log; files of 16 MB and more are left "
        "alone, so each run rewrites little earlier output). Warm, that compaction took 1.0, "
        "1.8 and 4.2-4.6 s for 80, 720 and 2,880 such files: every 50 batches (~200 files at "
        "4 a batch) about 1.3 s, against up to ~3 s saved in every batch's de-duplication "
        "read once an hour of batches has landed. The stream workload (21 batches) and the "
        "freshness workload (under 50 batches) never reach a compaction, so their recorded "
        "figures stand."
        " 2026-11-24, night, re-recorded with the rest: the 800-file day replayed in 12.8 s "
        "(runs 14.0, 10.1, 12.8 s) against 7.0 s compacted (7.7, 6.8, 7.0 s; 1.83x; JVM CPU "
        "22.4 vs 11.5 s), the compaction 4.7 s: compaction plus the compacted replay 0.92x of"
        " the small-file replay. The stream now compacts watermark_progress too (a file per "
        "batch, which every restart and every nightly watermark poll reads whole), right "
        "after the batch's progress row, every event_log_compact_every batches."
        " 2026-11-24, late night, re-recorded with the rest: the 800-file day replayed in "
        "11.7 s (runs 11.7, 11.8, 10.3 s) against 8.5 s compacted (8.5, 8.7, 7.2 s; 1.37x; "
        "JVM CPU 20.4 vs 14.7 s), the compaction 5.0 s: compaction plus the compacted replay "
        "1.15x of the small-file replay. "
        " 2026-11-26, per currency: small files 15.8 s, compacted 12.8 s (1.23x), compaction "
        "7.4 s; every contender about 1.4x its time of 2026-11-24 on this machine."),
    "freshness": (
        "Latency = waiting for the next trigger (up to one interval) + the batch that picks the "
        "file up (median batch seconds per rate in the table). The feed starts once the query "
        "has committed its first batch (a warm-up file; its latency is the cold start in the "
        "table: JIT, first snapshots, reading the batch marks), and a batch takes every file "
        "that has landed, so a slow batch is caught up by the next. When a batch takes longer "
        "than the trigger interval, files queue behind it and p95 approaches two batch "
        "durations. Full scale, 2026-11-23, same feed each time: with a 5 s trigger, cold and "
        "10 files a trigger, p95 45.4 s (1,000 ev/s) and 37.5 s (5,000 ev/s): the 20-30 s first "
        "batch left a queue that 10-file batches never drained; warm and uncapped, 25.1 s "
        "against a bound of 20.9 s and 21.7 s against 19.5 s, since a ~10 s batch is twice the "
        "trigger; with a 10 s trigger, 21.6 s against 29.8 s at 1,000 ev/s (met), while at "
        "5,000 ev/s a batch held ~13 files (65,000 events) and took a median 15.2 s, longer "
        "than the trigger again: p95 37.0 s against 35.2 s. With Spark's code cache raised "
        "from 100 to 2,000 classes (see the stream workload: a batch no longer recompiles "
        "~175 classes), recorded here: 22.4 s against 29.3 s and 21.0 s against 29.4 s, both "
        "met; at 5,000 ev/s a batch now holds ~9 files in a median 9.4 s, inside the trigger. "
        "The margin is thin: once a batch outlasts the trigger, the next one is bigger and "
        "slower, so a busier machine can tip the higher rate back into a queue. The per-batch "
        "cost is mostly fixed (~10 s: five commits and the MERGE). 2026-11-24, evening, on "
        "the quiet machine after a reboot, with the stream's uncompressed cache: batch "
        "medians 3.1 s and 3.7 s, p95 13.3 s at both rates against bounds of 23.1 s and "
        "23.7 s; cold start 12.5-13.6 s."
        " 2026-11-24, night, re-recorded at the final code: batch medians 3.4 s and 4.2 s, "
        "p95 13.3 s and 13.8 s against bounds of 23.4 s and 24.2 s (met)."
        " 2026-11-24, late night, re-recorded at the code whose de-duplication reads a pinned"
        " event_log version (see the stream): batch medians 3.0 s and 4.0 s, p95 12.5 s and "
        "13.6 s against bounds of 23.0 s and 24.0 s (met)."
        " 2026-11-25. Until now the feed started on an empty event_log, so the de-duplication"
        " horizon (the last hour of event_log, re-read by every batch) held at most the 90 s "
        "fed: not the steady state of a stream that has run for an hour. The warehouse now "
        "starts with an hour of archived events at the feed's rate (3.6M rows at 1,000 "
        "events/s, 18M at 5,000; built once, cloned per run with hard links). With the de-"
        "duplication that grouped the whole horizon (run the same morning on the same data, "
        "the code as it was but for that one line): batch medians 7.0 s and 17.7 s, p95 16.8 "
        "s and 36.7 s, JVM CPU 189 s and 233 s; at 5,000 events/s every batch outlasted the "
        "10 s trigger, so files queued behind it (the bound, 2 x trigger + the median batch, "
        "still passed at 37.7 s, since a slow batch raises its own bound). With the batch's "
        "ids semi-joined to the horizon (see the stream), recorded: batch medians 3.95 s and "
        "6.4 s, p95 14.3 s and 16.3 s against bounds of 24.0 s and 26.4 s (met), JVM CPU 66 s"
        " and 113 s; cold start 13.2 s and 5.9 s. "
        " 2026-11-26, per currency: p95 16.3 s at 1,000 ev/s and 17.6 s at 5,000 ev/s, "
        "within the trigger-based bound, against the user goal of 5 s at 1,000 ev/s, which "
        "a 10 s trigger cannot meet by construction (an event waits up to a trigger before "
        "its batch starts); the design change it needs is issue 38's."),
    "replay": (
        "Where the time goes now (full scale, 20.2M event_log rows, 1.73M windows; job "
        "timeline of one warm run from the Spark UI's REST API, 2026-11-24): ~2 s of Delta "
        "reads (the event log's version, file listings); the id count 14.8 s (map 7.8 s: the "
        "scan, the typed checks, a 64-bit hash per event_id and the shuffle write of 20.2M "
        "hashes; reduce 6.9 s: radix sort and a count per hash); 3.7 s in which the "
        "quarantine commit and the canonical write's planning overlap; the rows of the "
        "220,000 repeated ids 6.4 s (a scan that keeps 2%, then the exact first copy by "
        "arrival order); every other row's scan and partial window sums 13.4 s; the final "
        "sums 3.5 s and the Parquet write 4.1 s; then ~5 s of concurrent commits "
        "(uncaught_duplicates, replay_conflicts) and the run record. The plain floor does one "
        "scan, one partially aggregated shuffle and one write. The replay must find every "
        "copy of an event_id across the whole day, so it reads the day three times (the id "
        "count and the two branches; Spark cannot feed two shuffles from one scan) and "
        "commits five tables: the 1.25x target against the plain floor is out of reach "
        "while the replay de-duplicates; against the floor that also de-duplicates (one "
        "sort aggregate of the whole day by event_id) it is ~1.3x, doing more. Measuring "
        "protocol, from 2026-11-24: every contender runs once untimed on the full-size day, "
        "then three times in turns, and the median run is reported (every run is in "
        "wall_seconds_runs); one cold run each had put the replay at 53.3 s against a floor "
        "of 10.3 s, the warm replay runs 39-57 s depending on the machine's load. DuckDB over "
        "the same Parquet files is one to two orders of magnitude faster at this size: a "
        "single-process columnar engine with no job scheduling or commit protocol. "
        "Changes, oldest first, each measured side by side: (1) the run's counts are observed "
        "on the canonical write (Observation) instead of caching the totals and aggregating "
        "them again; (2) uncaught_duplicates (what the stream counted twice, per window and "
        "key) comes from the same pass, so the audit never scans the event log (the replay "
        "then took 80.8-102.0 s, 7.8-8.4x the floor); (3) instead of grouping all 20.2M rows "
        "by event_id (min_by over struct buffers is a sort aggregate: scan + shuffle of "
        "1.13 GB 27.8 s, sort + first copy 32.8 s), the day's ids are counted first as 64-bit "
        "hashes, the repeated ones are broadcast (at most replay_broadcast_ids, default 1M; "
        "above it the whole day is grouped as before), and only their rows are grouped: a "
        "hash shared by two ids only sends both down the exact path, so totals cannot change, "
        "and the reference test runs both paths; the same count tells whether any row fails "
        "the typed rules now, and with none the quarantine pass reads no payload. Steps 2-3 "
        "to a no-op sink in turns: 54.7 s -> 23.1 s; full replay 83.9 s -> 63.0 s; (4) the id "
        "count is a count over a window partitioned by the hash after the shuffle, not a "
        "groupBy().count(), whose map-side partial aggregation hashed 20.2M nearly unique ids "
        "and combined none (alone, in turns: 16.6-18.4 s -> 12.5-14.7 s), and the day's "
        "quarantine, uncaught_duplicates and replay_conflicts writes run in threads beside "
        "the canonical write, as the stream's writes do (full replay, old and new code "
        "alternating in one process, 5 warm runs each: median 45.6 -> 39.3 s, JVM CPU 85.1 "
        "-> 74.7 s, same totals). Tried and not kept: shuffling by event_id before the "
        "first-copy aggregation, so partial and final share one sort (3.46 -> 3.06 s on 1M "
        "events in isolation, but the 20M replay took 91.1 s against 80.8-84.9 s without). "
        "2026-11-24, afternoon: alone, warm, on a quiet machine the 20M replay takes 39-40 s "
        "(the recorded median ran in turns with the four baselines). Tried and not kept: "
        "every copy summed as if it were an event, in a lean pass that never reads the "
        "event_id (four sums instead of nine), then the copies of the repeated ids taken out "
        "and their first copies put back with the duplicate and conflict counts; alternating "
        "with the code as is in one process, 3 warm runs each: 38.9, 41.0, 39.1 s against "
        "40.3, 40.4, 39.0 s, JVM CPU 74.6-77.9 s against 74.2-78.1 s, identical rows. Reading "
        "and hashing the event_id a second time and the five extra sums cost nothing "
        "measurable; the time is in the scans and shuffles themselves. "
        "2026-11-24, evening, recorded on the quiet machine after a reboot (the afternoon's "
        "code plus the uncompressed cache, see the stream): ours 24.3, 22.8, 24.2 s (median "
        "24.2 s, inside the 30 s goal for a 20M-event day) against the plain floor 5.7, 5.2, "
        "4.6 s (4.67x) and the de-duplicating floor 20.0, 20.5, 20.4 s (1.19x; 1.42x in the "
        "afternoon); DuckDB 0.79 s and 6.3 s. The machine, not the code, halved the walls; "
        "the ratio to the plain floor stays out of reach for the reasons above. 2026-11-24, "
        "late evening, re-recorded at the final code (a conflict is now listed by the day of "
        "its earliest copy and counted from the rows written, an observation on the "
        "replay_conflicts write instead of a sum in the totals): ours 24.95, 24.1, 28.3 s "
        "(median 24.95 s) against the plain floor 6.0, 5.6, 6.0 s (4.15x) and the "
        "de-duplicating floor 21.4, 22.2, 20.3 s (1.17x); DuckDB 0.77 s and 6.3 s."
        " 2026-11-24, night, re-recorded with the whole benchmark after a review round that "
        "left this path as it was for this day (the replay now also reads the calendar day "
        "where it differs from the day's windows, which happens only when the window step "
        "does not divide 24 hours; here the windows are 1 minute): ours 27.7, 29.7, 29.3 s "
        "(median 29.3 s, still inside the 30 s goal) against the plain floor 5.4, 8.4, 5.4 s "
        "(5.47x) and the de-duplicating floor 22.7, 23.6, 23.2 s (1.26x); DuckDB 0.89 s and "
        "6.8 s; JVM CPU 56.0 s against 45.1 s for the de-duplicating floor (47.3 vs 41.7 s in"
        " the previous recording). The stream in the same run took 9% more CPU than in its "
        "previous recording with no change in its steps either; this workload's median has "
        "ranged 24-57 s over recordings of the same design."
        " 2026-11-24, late night, re-recorded with the whole benchmark (the event log's "
        "version is now read from its log's file names instead of DESCRIBE HISTORY, one Spark"
        " job less): ours 29.0, 24.7, 27.6 s (median 27.6 s, inside the 30 s goal) against "
        "the plain floor 5.5, 7.3, 7.7 s (3.76x) and the de-duplicating floor 22.5, 22.3, "
        "22.9 s (1.23x); DuckDB 0.84 s and 6.5 s; JVM CPU 52.6 s against 44.0 s for the de-"
        "duplicating floor. "
        " 2026-11-26, money per currency, the goal now <= 1.0x the de-duplicating floor: ours "
        "50.1-60.6 s (median 59.0) against that floor's 39.2 s (1.51x) and the plain floor's "
        "10.6 s; DuckDB 1.7 and 8.9 s. Every contender ran about 1.5-2x its time of "
        "2026-11-24 (load 2.6 at the start). What the grain costs, measured alone (same "
        "20M-event day, alternating, untimed warm-up, medians of three): the de-duplicating "
        "floor grouped by (window, key) 26.1 s (25.8, 26.1, 27.8) against (window, key, "
        "currency) 30.9 s (30.9, 30.6, 32.9), +18%: the currency is carried through the "
        "first-copy struct and the day has 2.15M rows instead of 1.73M."),
    "audit": (
        "2026-11-23, evening: the audit reads four per-window tables and nothing else. "
        "Before, the stream's uncaught duplicate copies were found by grouping the day's "
        "20.2M event_log rows by event_id in the audit (69.9 s at full scale, 0.47x "
        "DataComPy); the replay, which already groups every copy by event_id, now writes "
        "them to uncaught_duplicates per (window, key, currency), checked against the pure reference "
        "on random streams, conflicting copies included. Then the summary figures are "
        "observed on the reconciliation write instead of read back from it (A/B in one "
        "process: 761K rows 13.0-13.7 s -> 8.4-9.5 s; 1.73M rows 18.4 -> 17.1 s), and the "
        "reconciliation keeps Delta min/max stats on window_start, window_end, key and "
        "status only (write of 1.73M rows 17.4-17.9 s -> 14.9-16.1 s). Full scale, in order: "
        "23.9 s vs 31.7 s (1.32x), 25.7 s vs 37.7 s (1.47x, with the bigger warm-up), "
        "22.3 s vs 29.9 s (1.34x, recorded; CPU 42.5 s vs 55.9 s). Where the 22 s go "
        "(job timeline, 1.73M rows): ~2.5 s of Delta log reads and file listings, the scan "
        "and partial aggregation of 3.5M input rows ~4.8 s, the final aggregation with the "
        "reconciliation arithmetic on DECIMAL(38,2) (BigDecimal) and the write ~13 s, of "
        "which to a no-op sink 8.3 s, the observed summary 2.8 s, Parquet encoding ~3.8 s "
        "and Delta's commit and stats the rest. DataComPy only joins two tables and "
        "compares columns: it reads neither late_events nor uncaught_duplicates and writes "
        "nothing. Tried and dropped: carrying amounts as DECIMAL(18,2) through the union "
        "(4.3-4.9 s vs 4.9-5.1 s to a no-op sink at 761K rows, within noise). record=True "
        "adds the late attribution (a window over the day's event_log) and the breaks "
        "insert into SQLite: 49.1 s more at full scale (35,195 breaks). 2026-11-23, late: "
        "(1) the union is shuffled as it is and aggregated once the rows are together: each "
        "input holds a (window, key, currency) once per file, so the map-side partial aggregation "
        "hashed 3.5M rows and combined nothing (old and new alternating in one process at "
        "1.73M rows, warm: 14.7-19.2 s, median 18.2, against 15.4-18.7 s, median 16.0); (2) "
        "the attribution evaluates the first-copy window over the day's 20M event_log rows "
        "once, not once per dimension (a union of three selects over it became one explode): "
        "58.3 s -> 27.1 s warm; (3) each benchmark run starts from an empty report database, "
        "which had grown to 92 MB over the evening's runs (the breaks insert took 6.5-16 s). "
        "Three full runs with (1), the last with all three, recorded: ours 21.1, 23.8, 22.6 s "
        "against DataComPy 42.8, 35.8, 38.5 s (2.03x, 1.50x, 1.70x); record=True 92.7, 97.4, "
        "60.5 s. Read the ratio with care: in a fresh process, warm, DataComPy's compare ran "
        "23.0-26.6 s (same with Spark's code cache at 100 or 2,000 classes), while inside the "
        "benchmark it runs after our record=True pass and takes 36-43 s, so the fair ratio "
        "is nearer 1.4-1.6x; the 2x target is not met. 2026-11-24: part of the gap was the "
        "measuring protocol. DataComPy caches its joined rows and never unpersists them, so "
        "every run of it left 1.7M cached rows behind and whoever ran next had less "
        "execution memory; and one run each, in a fixed order, measured the JVM's state as "
        "much as the code (with three rounds in turns and no cleanup: ours 16.6, 19.6, "
        "19.1 s, DataComPy 31.8, 26.3, 28.9 s, 1.51x). Now both contenders run once untimed "
        "on the full-size data, then three times in turns, the session's cache is cleared "
        "(untimed) after every run, and the median run is reported (every timed run is in "
        "wall_seconds_runs). Recorded: ours 19.8, 16.4, 15.2 s, DataComPy 31.1, 31.7, 29.7 "
        "s: 1.90x in wall time, 1.89x in JVM CPU (30.0 vs 56.8 s). The target is not met. "
        "Profile of the warm audit (Java Flight Recorder, 2,048 samples of one 1.73M-row "
        "run): Parquet encoding 22% (most in the seven DECIMAL(38,2) columns, written as "
        "16-byte binaries through BigInteger), the map side's row building and shuffle "
        "write 25%, the hash aggregation 17%, BigInteger/BigDecimal arithmetic 11%, the "
        "scan 5%, Delta's stats 4%. To a no-op sink the same rows take 5-6 s and an "
        "unpartitioned Parquet write ~9 s, against 12-14 s for the Delta replaceWhere "
        "write: half of our time is writing the day's 1.73M reconciliation rows, which "
        "DataComPy does not do. Tried and not kept (alternating, within noise): Snappy vs "
        "LZ4 vs no compression, Parquet dictionaries off, page checksums off, Delta stats "
        "off (10.4-12.9 s vs 12.2-12.9 s), a narrow union (one amount column and a tag "
        "instead of four amount columns): 4.8-6.1 s vs 5.0-6.1 s to a no-op sink. "
        "2026-11-24, morning: the timeline of one warm full-scale run (15.0 s) is the four "
        "input versions 0.6 s, building the plan 0.8 s, the reconciliation table's snapshot "
        "0.85 s, the four inputs' file listings 0.6 s, the scan and shuffle of 3.48M rows "
        "1.4 s, then 10.0 s in one stage of 4 tasks (two waves on 2 cores, ~5 s and 4.1-4.8 "
        "s of CPU each, balanced): the partial and the final aggregation, both after the "
        "shuffle (Spark keeps the partial one even when the rows are already together), the "
        "observed summary, a sort on the constant partition column that Spark's writer "
        "inserts, and the Parquet encoding. Tried, alternating in one process, 6 warm runs "
        "each, medians of the variant vs as is, not kept: writing without that sort "
        "(spark.sql.maxConcurrentOutputFileWriters = 4: 15.0 vs 15.9 s in one series, 14.4 "
        "vs 14.1 s and JVM CPU 26.7 vs 26.1 s in the next), a summary of four decimal sums "
        "instead of six (gap and residual totals derived: 16.1 vs 14.2 s), the four version "
        "lookups in threads (16.05 vs 16.07 s). The same benchmark re-run that morning, "
        "with the threads, gave ours 20.5, 21.0, 14.8 s against DataComPy 32.8, 29.8, 39.1 s "
        "(1.60x, JVM CPU 37.9 vs 59.9 s) on a machine where the same replay also took 30% "
        "more CPU than the day before: with the union, the ratio moved between 1.6x and 1.9x "
        "from one run to the next. Then the inputs are full-outer joined on (window_start, "
        "key) instead, each holding a key once (the day's late events summed per key first): "
        "the two big sides are hashed once, where the union was hashed in a partial and a "
        "final aggregation (alternating in one process, 6 warm runs each: median 14.97 -> "
        "12.94 s, JVM CPU 27.1 -> 24.3 s; same status counts and sums). Recorded at this "
        "code: ours 17.6, 17.3, 18.1 s against DataComPy 39.9, 30.8, 36.3 s, 2.06x in wall "
        "time and 2.04x in JVM CPU (32.9 vs 67.0 s): the 2x target is met in this run, by a "
        "margin smaller than the spread between runs, so read it as about 2x. 2026-11-24, "
        "afternoon, the same code re-recorded: ours 14.1, 12.5, 13.4 s against DataComPy "
        "26.5, 25.5, 20.4 s, 1.90x in wall time and 1.92x in JVM CPU (24.9 vs 47.9 s): not met "
        "in this run. Alone on a quiet machine the warm audit takes 11.1-12.1 s (median 11.3 s, "
        "~21 s of JVM CPU). Its timeline (Spark UI REST, one warm run): the four input "
        "versions, one after another, ~1 s; planning 0.5 s; the reconciliation table's "
        "snapshot 1.3 s; the inputs' file listings 1.3 s (5, 4, 4 and 4 files for the day); "
        "the four scans and shuffles 2.1 s; the join of provisional with canonical 3.4 s, "
        "whose output Spark shuffles again for the join with the small side, since a full "
        "outer join's output keys are not known to be partitioned; then the write stage, "
        "~55% of the run: the 1.73M rows sorted for the sort-merge join with the 28K-row "
        "small side, the arithmetic, the observed summary, Delta's checks and statistics, a "
        "sort by window_date and the Parquet encoding; every 10th commit adds a ~1.9 s "
        "checkpoint. By CPU samples (Java Flight Recorder): generated join and projection code "
        "30%, Parquet writing 22%, DECIMAL(38,2) arithmetic 10%, sorting 7%, shuffle 6%, "
        "reading 5%. Tried, alternating with the code as is in one process, not kept: the "
        "small side broadcast, so the big join's output is not shuffled again (13.4 vs 11.3 s "
        "median; executor time fell from ~30 to ~18 s, but the chain of broadcasts waits "
        "~2 s); a shuffled hash join on the small side (12.0 vs 11.3 s); skipping the "
        "writer's sort (maxConcurrentOutputFileWriters = 2: 12.1 vs 11.3 s); no Parquet "
        "column statistics on the 15 non-key columns and no dictionary on the amounts (~1 s "
        "less JVM CPU, within noise); the input versions looked up in parallel (13.8 vs 14.8 "
        "s in a contended series, differences of -0.2 to +1.1 s run by run). "
        "2026-11-24, evening, recorded on the quiet machine after a reboot: ours 8.36, 7.91, "
        "7.32 s against DataComPy 18.2, 13.1, 18.1 s, 2.29x in wall time and 2.35x in JVM "
        "CPU (14.6 vs 34.3 s): met in this run; over the recorded runs at this design the "
        "ratio has ranged 1.90-2.29x, so read it as about 2x. 4.6 s per 1M (window, key, currency) "
        "rows. 2026-11-24, late evening, re-recorded at the code that reads late_events as of "
        "the replay's cut (the audit first reads the recent commit history of late_events for "
        "batch marks: 0.20-0.24 s warm on this day, whose late_events the benchmark writes "
        "without marks, so nothing more): ours 9.39, 8.91, 8.40 s against DataComPy 19.9, "
        "17.2, 17.8 s, 2.00x in wall time and 2.01x in JVM CPU (16.6 vs 33.4 s), met by no "
        "margin; 5.15 s per 1M rows."
        " 2026-11-24, night, re-recorded at the code that first checks that the day's "
        "canonical_totals and uncaught_duplicates come from one finished replay (a day never "
        "replayed, or a replay that failed between its writes, used to show every window as a"
        " break): ours 9.02, 9.72, 9.01 s against DataComPy 17.96, 20.26, 15.97 s, 1.99x in "
        "wall time and 2.03x in JVM CPU (16.4 vs 33.3 s): not met in this run, by 0.01. The "
        "check is three small reads (the day's replay_runs rows, the replay_id of one "
        "canonical and one duplicate row), 0.35-0.48 s warm on this day; one Spark job over "
        "the union of the three took 0.42-0.51 s, no better, so it stays. 5.21 s per 1M rows."
        " Then the check reads the totals' replay only (a replay writes its duplicates after "
        "its totals commit, so those follow), and the audit was recorded again on its own: "
        "ours 8.41, 10.93, 8.81 s against DataComPy 21.01, 15.98, 15.33 s, 1.81x in wall time"
        " and 1.84x in JVM CPU (16.0 vs 29.5 s): ours 0.2 s faster than in the full run, "
        "DataComPy 2 s faster. Over the recordings of this design the ratio has ranged "
        "1.81-2.29x: about 2x, not reliably above it. 5.09 s per 1M rows."
        " 2026-11-24, late night: a timeline of warm runs (Spark's REST API, 20M-event day) "
        "showed ~3 s of fixed work before the scans, of which the four input versions "
        "(DESCRIBE HISTORY, a Spark job each) took 0.5 s and the batch marks of late_events "
        "(history(50)) 0.1 s. Both are now read from the tables' log files: the newest "
        "version by probing the commit files after the one _last_checkpoint names, the marks "
        "from the commit files, newest first. Alternating old and new lookups in one process,"
        " 6 warm runs each: median 7.65 -> 7.07 s, the same versions pinned. Tried, not kept:"
        " the small side (late and duplicate sums, 28K keys) broadcast into a left join after"
        " the big full outer join, which saves the second shuffle of 1.73M rows (median 6.79 "
        "vs 7.33 s), but a late or duplicate key that neither provisional nor canonical holds"
        " would then vanish, and finding such keys first costs more than the gain (1.3 s: "
        "both big sides scanned again); a union of the four inputs with first-non-null window"
        " functions instead of the joins (9.73 vs 7.82 s); Delta's all-files-in-checksum "
        "option for the reconciliation table's snapshot (within noise). Recorded with the "
        "whole benchmark: ours 8.46, 8.97, 8.48 s against DataComPy 15.8, 17.7, 18.3 s, 2.09x"
        " in wall time and 2.07x in JVM CPU (16.0 vs 33.1 s): met in this run, 4.90 s per 1M "
        "rows; record=True (late attribution, breaks into SQLite) 28.4 s. "
        " 2026-11-26, per currency (2.16M rows instead of 1.73M): ours 19.5, 18.0, 17.1 s "
        "against DataComPy 44.0, 36.0, 38.7 s, 2.15x (goal now 3x: not met); record=True "
        "55.2 s. Every contender about 2x its time of 2026-11-24 on this machine."),
    "lateness": (
        "The reference is a Python loop over events (advance_watermark per event). The "
        "vectorised curve walks the log once, with bound 0 (watermark_series: per-partition "
        "running maxima, the idle mask, the min rule; 0.9 s for 10M events, "
        "watermark_series_seconds_one_bound in the result file), and derives each bound's "
        "watermarks by subtracting L (shift_watermark_series: the min rule, the idle rule and "
        "the running maximum commute with subtracting a constant; property-tested against a "
        "walk per bound), so what is left per bound is the drop count and the binary search "
        "for each window's emit moment. 2026-11-24, in the same run as the reference each "
        "time: one walk per bound 6.79 s for 6 bounds (8.8M events/s per bound, 130x the "
        "reference per event) -> one walk for all 3.20 s (18.7M, 286x); same curve."
        " 2026-11-24, night, re-recorded: 2.07 s for 10M events and 6 bounds (28.9M events/s "
        "per bound), 176x the reference per event (the reference, timed on a 20,000-event "
        "slice, ran 2.5x faster than in the previous recording). The what-if over the "
        "warehouse (reckon lateness) now breaks arrival-time ties by file name and then line,"
        " as the stream reads landing files."),
    "scale": (
        "Full scale, 2026-11-24 (afternoon), one process, in order 1M, 5M, 20M events: the "
        "replay grows 3.2x in wall time for 20x the events (14.4 -> 25.7 -> 45.2 s; in the "
        "morning's run 13.2 -> 22.3 -> 54.7 s; before the replay grouped only repeated ids, "
        "19.6 -> 80.7 s), the audit 1.5x (10.9 -> 16.0 s for 761K -> 1.73M rows: the "
        "synthetic day's (window, key, currency) rows stop growing once every key has an event in every "
        "window). Fixed costs (Delta log reads and commits, job scheduling) dominate the small "
        "end, so the per-event cost falls with scale. Driver memory is measured where the "
        "driver is alone in its JVM: a one-worker Spark standalone cluster on loopback (the "
        "test suite's), executors in the worker's JVM with 6 GB, and the driver in a fresh "
        "process per day (bench/driver_memory.py) with a 1 GB heap, replaying and auditing the "
        "same three days. Its peak heap in use is 362, 409 and 360 MB (replay; the audit 293, "
        "262, 292 MB): 0.99x over the 20x range, met; after full GCs it keeps 94, 93 and 93 "
        "MB; the driver JVM's peak RSS is 818, 876 and 784 MB (0.96x). The 20M-event day "
        "finishes with a 1 GB driver, so the driver never holds the data. On the cluster the "
        "walls are longer (replay 55.9, 69.0, 98.2 s: a cold JVM each time, and every task's "
        "results and shuffle data cross processes), which is not what this row measures. In "
        "one driver process for all three days, the same cluster gave 359 -> 625 MB (1.74x) "
        "and kept 94 -> 159 MB: Spark's status store keeps the finished jobs, stages and "
        "tasks of the earlier days (up to its retention limits), so that growth follows the "
        "work the process has done, not the day's size; hence one process per day. In "
        "local[2] the driver JVM is also the executor, so its peak heap in use counts the "
        "executors' working memory and garbage: 1.82 -> 3.65 GB of a 4 GB heap (2.01x; 1.72x, "
        "1.85x, 1.65x, 1.95x and 2.46x in earlier runs), reported but not a measure of the "
        "driver. What that JVM keeps after full GCs once Spark's ContextCleaner has run is "
        "139 -> 166 -> 194 MB (1.39x; 160 -> 207 MB in the morning's run). One GC is not "
        "enough: the cleaner drops a finished job's broadcasts, shuffle statuses and "
        "unpersisted blocks only after a collection has found them unreachable. The replay's "
        "broadcast holds 220,000 repeated id hashes (1.8 MB as longs) at 20M events. The "
        "Python driver's peak RSS stays flat (1.00x): nothing is collected to the driver. "
        "2026-11-24, evening, on the quiet machine after a reboot: replay 6.1 -> 10.4 -> "
        "27.0 s, audit 6.4 -> 7.9 -> 9.6 s; on the standalone cluster the driver's peak heap "
        "in use is 474, 499 and 411 MB (replay; the audit 282, 301, 276 MB; 0.87x), it keeps "
        "93 MB after full GCs at every size, and its peak RSS is 952, 918 and 892 MB (0.94x); "
        "local[2]'s JVM peaked at 2.71 -> 3.72 GB (1.37x) and kept 309 -> 342 MB after GCs "
        "(1.11x; more than in the afternoon since cached frames are now stored "
        "uncompressed)."
        " 2026-11-24, night, re-recorded with the whole benchmark: replay 6.7 -> 13.5 -> 25.8"
        " s, audit 6.4 -> 8.8 -> 11.1 s; on the standalone cluster the driver's peak heap in "
        "use 395, 263 and 523 MB (replay; the audit 244, 267, 349 MB; 1.33x over the 20x "
        "range, met), 93 MB kept after full GCs at every size, peak RSS 816, 679 and 979 MB."
        " 2026-11-24, late night, re-recorded with the whole benchmark: replay 6.2 -> 13.8 ->"
        " 26.9 s, audit 5.4 -> 8.6 -> 8.9 s; on the standalone cluster the driver's peak heap"
        " in use 442, 347 and 345 MB (replay; the audit 293, 292, 338 MB; 0.78x over the 20x "
        "range, met), 92-112 MB kept after full GCs, peak RSS 987, 905 and 966 MB."
        " 2026-11-26, per currency (totals at (window, key, currency)), on a machine that ran"
        " every contender 1.4-2x slower than on 2026-11-24 (see the replay and audit rows of"
        " the same day): replay 15.6 -> 23.1 -> 56.8 s, audit 12.2 -> 18.2 -> 21.8 s; on the"
        " standalone cluster the driver's peak heap in use 442, 268 and 446 MB (replay; the"
        " audit 485, 247, 291 MB; 1.01x over the 20x range, met), 94-114 MB kept after full"
        " GCs, peak RSS 1,020, 817 and 1,020 MB: the grain adds rows, never driver memory."),
    "long_day": (
        "2026-11-25. The stream and freshness workloads start on a day that is empty, so no "
        "batch there meets what a stream meets by evening: provisional_totals holding the "
        "day's FINAL windows in the file its MERGEs keep rewriting (a MERGE rewrites every "
        "row of each file it touches, and its output holds the rows it updated together with "
        "every other row of the files it read, so the file that holds the newest windows "
        "holds the whole day). This workload starts every run from a copy (hard links) of "
        "such a warehouse, built once: an hour of event_log behind the de-duplication (3.6M "
        "rows, 1,000 events/s, in ~30 MB files that the stream's event_log compaction leaves "
        "alone, as it would an hour it had compacted) and 1.85M (window, key, currency) rows of the day"
        " up to 20:00 in provisional_totals (7,200 windows x 200 keys, all FINAL but the last"
        " window, in one file). It feeds the generator's events from 20:00 (1,000 events/s, "
        "5,000-line batches: a 5 s trigger) straight to the stream's BatchProcessor, the "
        "first batch untimed (it sets the watermark), then in turns: six batches on the day "
        "as MERGEs leave it, and on a fresh copy the first batch, the stream's periodic "
        "compaction (BatchProcessor.compact_open_days, which the stream runs every "
        "event_log_compact_every batches: event_log's small files bin-packed, the day of "
        "provisional_totals split at the lowest MERGE bound; timed on its own) and the same "
        "six batches. Recorded (the median of 3 runs in turns, per-batch medians within it): "
        "on the day as merged every MERGE copied the whole day (1,440,000-1,440,400 rows, "
        "Delta's numTargetRowsCopied) and took 7.40 s, a batch 9.31 s; after the compaction "
        "the MERGEs copied 0-400 rows and took 1.74 s, a batch 3.39 s (2.75x faster; JVM CPU "
        "for the six batches 81.3 s against 30.5 s). The compaction took 5.4 s, so it has "
        "paid for itself within one batch; it runs once in 50 by default. What is left of a "
        "settled batch of 5,000 lines is the fixed cost the stream workload shows (the "
        "MERGE's ~19 jobs, five commits). Two earlier recordings the same morning: batches "
        "8.65 s against 3.15 s with the compaction at 5.1 s; and, with the archived hour in "
        "13.8 MB files, 9.41 s against 2.96 s with the compaction at 13.7 s, since "
        "event_log's compaction then rewrote the whole hour (files under its 16 MB floor), "
        "which a stream in its steady state does not: it rewrites the batches' files since "
        "its previous compaction. At the smoke and --quick scales the archived hour's files "
        "are under that floor, so there the timed compaction re-packs it."
        " 2026-11-26, per currency: the day up to 20:00 now holds 1.85M (window, key, currency)"
        " rows (7,200 windows x 257 pairs); on the day as merged every MERGE copied 1.85M rows"
        " and took 16.96 s, a batch 19.35 s; after the compaction the MERGEs copied ~275 rows"
        " and took 2.51 s, a batch 4.84 s (4.0x faster). The compaction took 10.4 s, paid back"
        " within one batch. The machine ran 1.4-2x slower than on 2026-11-25 (see the scale"
        " row), so the absolute times are not comparable; the ratio is the finding."),
}


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


def write_markdown(results_dir: Path, target: Path) -> None:
    results = {}
    for name in ORDER:
        f = results_dir / f"{name}.json"
        if f.is_file():
            results[name] = json.loads(f.read_text())
    any_r = next(iter(results.values()), None)
    lines = ["# Benchmarks", "",
             "Generated by `python -m bench` from `bench/results/*.json`; do not edit by hand "
             "(notes live in `bench/report.py`).", ""]
    if any_r is None:
        lines += ["No results yet: run `make bench-quick` or `make bench`.", ""]
        target.write_text("\n".join(lines))
        return
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
    lines += [
        "## Read this first", "",
        f"These numbers were measured on a shared 2-core machine: the 1-minute load average at "
        f"the start and end of each workload was {min(loads):g} to {max(loads):g} (the "
        "benchmark's own previous workload counts in it; 2 means both cores busy). " + scope
        + _spread(results) + "Ratios of contenders run "
        "back to back in one process are more telling, and CPU seconds more still. Re-run "
        "`make bench` on a quiet machine before quoting any absolute figure.", ""]
    m, v = any_r["machine"], any_r["versions"]
    quick = sorted({(n, r["scale_factor"]) for n, r in results.items()}, key=lambda x: x[0])
    lines += [
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
        "```", "",
        "## Results", "",
        "| workload | contender | size | wall s | throughput | peak driver RSS MB | vs ours "
        "| CPU s (python + JVM) |",
        "|---|---|---|---:|---:|---:|---|---:|"]
    for name, r in results.items():
        for row in _rows(name, r):
            lines.append(f"| {name} | " + " | ".join(row) + " |")
    lines += ["", "Peak driver RSS = this Python process + the Spark JVM it starts (psutil, "
              "sampled every 0.25 s); the JVM heap in use is in each result file. CPU seconds "
              "(psutil, this process and the JVM) are far less inflated by other work on a "
              "shared machine than wall seconds: compare contenders on both.", "",
              "## Targets", "", "| workload | target | goal | measured | met |",
              "|---|---|---|---:|---|"]
    for name, r in results.items():
        for t in r.get("targets", []):
            lines.append(f"| {name} | {t['target']} | {t['goal']} | {_fmt(t['measured'])} | "
                         f"{_fmt(t['met'])} |")
    absolute = _absolute_rows(results)
    if absolute:
        lines += ["", "## Absolute targets: what 2 cores should reach", "",
                  "Set by the product, not relative to a baseline. Replay and audit figures "
                  "are prorated linearly to the goal's size when recorded at another size; "
                  "the fastest other contender of the same run is shown in the same unit.", "",
                  "| workload | target | goal | measured | recorded at | fastest other "
                  "contender | met |", "|---|---|---|---:|---|---|---|", *absolute]
    lines += ["", "## Per workload", ""]
    for name, r in results.items():
        lines += [f"### {TITLES[name]}", "",
                  f"Scale factor {r['scale_factor']:g}; load average before "
                  f"{r['load_average_before']}, after {r['load_average_after']}; "
                  f"{r['total_seconds']} s including data preparation; started "
                  f"{r['started_at'][:19]}Z.", ""]
        ratios = r.get("ratios") or {}
        if ratios:
            lines += ["Ratios: " + ", ".join(f"{k} = {_fmt(val)}" for k, val in ratios.items())
                      + ".", ""]
        if name == "stream":
            lines += [_stream_profile(r), ""]
        for key, value in (r.get("profile") or {}).items():
            if key.endswith("_timeline_seconds"):
                lines += [f"Timeline of {key.removesuffix('_timeline_seconds')} (seconds "
                          "between Delta commits): " + ", ".join(
                              f"{k} {v:.1f}" for k, v in value.items()) + ".", ""]
        if NOTES.get(name):
            lines += [NOTES[name], ""]
    target.write_text("\n".join(lines))


def _stream_profile(r: dict[str, Any]) -> str:
    p = r.get("profile", {})
    steps = p.get("reckon_step_seconds_total", {})
    total = p.get("reckon_batch_seconds_total") or 0
    parts = ", ".join(f"{k} {v:.1f} s ({v / total:.0%})" for k, v in steps.items()) if total else ""
    native = r["results"].get("spark_native_watermark", {})
    ours = r["results"].get("reckon_stream", {})
    return (f"Where the aggregator's time goes (BatchMetrics.step_seconds summed over "
            f"{ours.get('batches')} batches, {total:.1f} s in batches, "
            f"{p.get('reckon_outside_batches_seconds')} s outside them): {parts}. "
            f"Late events: reckon kept {ours.get('late_events_kept'):,} in late_events; Spark's "
            f"query dropped {native.get('late_events_dropped'):,} valid deliveries as late "
            f"(and still held {native.get('events_left_in_state_unemitted'):,} in state, "
            "never emitted in append mode when the input ends)." + _sweep_text(p))


def _sweep_text(profile: dict[str, Any]) -> str:
    """The trigger-size sweep of the stream workload (absent from results recorded before
    the sweep existed)."""
    sweep = profile.get("trigger_sweep") or []
    if not sweep:
        return ""
    parts = "; ".join(
        f"{pt['lines_per_trigger']:,} lines a trigger ({pt['batches']} batches): reckon "
        f"{pt['reckon_events_per_second']:,} events/s, native "
        f"{pt['native_events_per_second']:,} ({pt['ratio']:.2f}x), "
        f"{pt['reckon_late_events_kept']:,} late events kept" for pt in sweep)
    return (" Larger triggers, same data, both contenders at the same size each time: "
            f"{parts}.")
