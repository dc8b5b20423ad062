package reckon.jvm;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessorWithInitialState;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The stream's de-duplication state, kept per hash bucket of event_id: each bucket holds a map
 * event_id -> (latest arrival in microseconds, last update in processing-time milliseconds).
 *
 * <p>Why buckets: keyed by event_id ({@link DedupState}), a batch of 100K rows is 100K groups,
 * each with its own call, key encoding and TTL index entry. Keyed by one of a few thousand
 * buckets, a batch calls the processor once a bucket, and the map's entries carry no TTL: one
 * processing-time timer a bucket prunes the entries not updated for {@code ttl}. An entry thus
 * lives at least {@code ttl} after its last update, as with a TTL, which is what
 * {@code reckon.dedup_state} reasons from; pruning later only keeps more, and an entry older
 * than the horizon never makes a duplicate (the verdict compares arrivals).
 *
 * <p>The bucket of an id must not change while a checkpoint's state lives: the count is
 * recorded with the checkpoint ({@code spark.dedup.StateSeed}). The rule and the rows'
 * handling are {@link DedupRows}'; a quarantined row passes through and touches no state.
 *
 * <pre>
 *   Dataset&lt;Row&gt; flagged = BucketedDedupState.flag(parsed, seed, 3_600_000_000L,
 *       Duration.ofHours(2), 1024);   // parsed's columns + is_duplicate (boolean)
 * </pre>
 */
public final class BucketedDedupState
    extends StatefulProcessorWithInitialState<Integer, Row, Row, Tuple2<String, Long>> {
  private static final long serialVersionUID = 1L;

  /** The bucket's column while the rows pass through the state (dropped after it). */
  private static final String BUCKET = "_dedup_bucket";

  /** A bucket's entries are looked at this many times a TTL. */
  private static final int PRUNES_PER_TTL = 4;

  private final long horizonMicros;
  private final long ttlMillis;
  private final int buckets;
  private final DedupRows fields;
  private transient MapState<String, Tuple2<Long, Long>> latest;
  /** When the bucket's pending prune is due (absent: none pending). */
  private transient ValueState<Long> pruneAt;
  /** Buckets this task has seeded a prune for (the seed calls once per entry, not per key). */
  private transient Set<Integer> seeded;

  private BucketedDedupState(StructType schema, long horizonMicros, long ttlMillis,
      int buckets) {
    this.horizonMicros = horizonMicros;
    this.ttlMillis = ttlMillis;
    this.buckets = buckets;
    this.fields = new DedupRows(schema);
  }

  /**
   * {@code rows} (with event_id, reason, arrival_us, partition, input_file, offset) and an
   * is_duplicate column, judged against every earlier copy the query's state holds, which
   * starts from {@code seed} (event_id string, latest_us long); {@code buckets} groups.
   */
  public static Dataset<Row> flag(Dataset<Row> rows, Dataset<Row> seed, long horizonMicros,
      Duration ttl, int buckets) {
    boolean hasPayload = DedupRows.hasPayload(rows);
    Dataset<Row> keyed = rows.withColumn(BUCKET, bucketOf(DedupRows.groupKey(), buckets));
    if (hasPayload) {
      keyed = DedupRows.payloadAsBytes(keyed);
    }
    StructType in = keyed.schema();
    StructType out = in.add("is_duplicate", DataTypes.BooleanType, false);
    Dataset<Row> seedKeyed = seed.select(functions.col("event_id"), functions.col("latest_us"),
        bucketOf(functions.col("event_id"), buckets).alias(BUCKET));
    MapFunction<Row, Integer> seedBucket = r -> r.getInt(2);
    MapFunction<Row, Tuple2<String, Long>> seedEntry =
        r -> new Tuple2<>(r.getString(0), r.getLong(1));
    Dataset<Row> flagged = keyed.groupBy(functions.col(BUCKET))
        .as(Encoders.INT(), Encoders.row(in))
        .transformWithState(new BucketedDedupState(in, horizonMicros, ttl.toMillis(), buckets),
            TimeMode.ProcessingTime(), OutputMode.Append(),
            seedKeyed.groupByKey(seedBucket, Encoders.INT())
                .mapValues(seedEntry, Encoders.tuple(Encoders.STRING(), Encoders.LONG())),
            Encoders.row(out), Encoders.tuple(Encoders.STRING(), Encoders.LONG()))
        .drop(BUCKET);
    return hasPayload ? DedupRows.payloadAsText(flagged) : flagged;
  }

  /** The bucket of a group key: the same id falls in the same bucket in every batch. */
  private static Column bucketOf(Column key, int buckets) {
    return functions.pmod(functions.xxhash64(key), functions.lit((long) buckets))
        .cast(DataTypes.IntegerType);
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    latest = getHandle().getMapState("latest_by_event", Encoders.STRING(),
        Encoders.tuple(Encoders.LONG(), Encoders.LONG()), TTLConfig.NONE());
    pruneAt = getHandle().getValueState("prune_at", Encoders.LONG(), TTLConfig.NONE());
    seeded = new HashSet<>();
  }

  @Override
  public void handleInitialState(Integer bucket, Tuple2<String, Long> entry,
      TimerValues timerValues) {
    long now = timerValues.getCurrentProcessingTimeInMs();
    Tuple2<Long, Long> kept = latest.getValue(entry._1());  // null when absent
    long at = kept == null ? entry._2() : Math.max(kept._1(), entry._2());
    latest.updateValue(entry._1(), new Tuple2<>(at, now));
    if (seeded.add(bucket)) {
      schedulePrune(bucket, now);
    }
  }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(Integer bucket,
      scala.collection.Iterator<Row> rows, TimerValues timerValues) {
    List<Row> out = new ArrayList<>();
    Map<String, List<Row>> copiesById = new HashMap<>();
    rows.foreach(row -> fields.isValid(row)
        ? copiesById.computeIfAbsent(row.getString(fields.eventId), id -> new ArrayList<>())
            .add(row)
        : out.add(DedupRows.withFlag(row, false)));
    if (copiesById.isEmpty()) {
      return CollectionConverters.asScala(out.iterator());
    }
    long now = timerValues.getCurrentProcessingTimeInMs();
    for (Map.Entry<String, List<Row>> copies : copiesById.entrySet()) {
      Tuple2<Long, Long> kept = latest.getValue(copies.getKey());  // null when absent
      long prior = fields.judge(copies.getValue(), kept == null ? null : kept._1(),
          horizonMicros, out);
      latest.updateValue(copies.getKey(), new Tuple2<>(prior, now));
    }
    schedulePrune(bucket, now);
    return CollectionConverters.asScala(out.iterator());
  }

  /** The bucket's prune: drops the entries not updated for the TTL, and schedules the next
   * one while entries remain. */
  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(Integer bucket,
      TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    long now = timerValues.getCurrentProcessingTimeInMs();
    List<String> stale = new ArrayList<>();
    latest.iterator().foreach(entry -> entry._2()._2() < now - ttlMillis && stale.add(entry._1()));
    stale.forEach(latest::removeKey);
    pruneAt.clear();
    if (latest.exists()) {
      schedulePrune(bucket, now);
    }
    return CollectionConverters.asScala(new ArrayList<Row>().iterator());
  }

  /**
   * One pending prune a bucket, due at the next point after {@code now} of a grid of a
   * fraction of the TTL. Each bucket's grid is offset by its number, so the buckets' prunes
   * fall in different batches rather than all reading the whole state in one.
   */
  private void schedulePrune(int bucket, long now) {
    if (pruneAt.exists()) {
      return;
    }
    long every = Math.max(1L, ttlMillis / PRUNES_PER_TTL);
    long offset = bucket * every / buckets;
    long at = (Math.floorDiv(now - offset, every) + 1) * every + offset;
    getHandle().registerTimer(at);
    pruneAt.update(at);
  }
}
