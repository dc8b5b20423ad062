package reckon.jvm;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessorWithInitialState;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The stream's de-duplication state as it was first laid out: keyed by event_id, a value
 * (the latest arrival) per id with a TTL. A checkpoint whose state began this way keeps it
 * (Spark refuses another state schema on the same checkpoint); a new checkpoint's state is
 * {@link BucketedDedupState}, which costs less per row (decision 0009).
 *
 * <p>The rule and the rows' handling are {@link DedupRows}'. The state's TTL (processing
 * time) only bounds its size; the verdict compares arrival times, so an entry past the horizon
 * never makes a duplicate. When the state may have forgotten a copy is decided in Python
 * ({@code reckon.dedup_state}), which then judges the batch against the archive instead.
 *
 * <pre>
 *   Dataset&lt;Row&gt; flagged = DedupState.flag(parsed, seed, 3_600_000_000L, Duration.ofHours(3));
 *   // parsed's columns + is_duplicate (boolean)
 * </pre>
 */
public final class DedupState extends StatefulProcessorWithInitialState<String, Row, Row, Long> {
  private static final long serialVersionUID = 1L;

  /** The grouping key's column while the rows pass through the state (dropped after it). */
  private static final String KEY = "_dedup_key";

  private final long horizonMicros;
  private final long ttlMillis;
  private final DedupRows fields;
  private transient ValueState<Long> latest;

  private DedupState(StructType schema, long horizonMicros, long ttlMillis) {
    this.horizonMicros = horizonMicros;
    this.ttlMillis = ttlMillis;
    this.fields = new DedupRows(schema);
  }

  /**
   * {@code rows} (with event_id, reason, arrival_us, partition, input_file, offset) and an
   * is_duplicate column, judged against every earlier copy this query's state holds, which
   * starts from {@code seed} (event_id string, latest_us long).
   */
  public static Dataset<Row> flag(Dataset<Row> rows, Dataset<Row> seed, long horizonMicros,
      Duration ttl) {
    boolean hasPayload = DedupRows.hasPayload(rows);
    Dataset<Row> keyed = rows.withColumn(KEY, DedupRows.groupKey());
    if (hasPayload) {
      keyed = DedupRows.payloadAsBytes(keyed);
    }
    StructType in = keyed.schema();
    StructType out = in.add("is_duplicate", DataTypes.BooleanType, false);
    MapFunction<Row, String> seedKey = r -> r.getString(0);
    MapFunction<Row, Long> seedLatest = r -> r.getLong(1);
    Dataset<Row> flagged = keyed.groupBy(functions.col(KEY))
        .as(Encoders.STRING(), Encoders.row(in))
        .transformWithState(new DedupState(in, horizonMicros, ttl.toMillis()),
            TimeMode.ProcessingTime(), OutputMode.Append(),
            seed.groupByKey(seedKey, Encoders.STRING()).mapValues(seedLatest, Encoders.LONG()),
            Encoders.row(out), Encoders.LONG())
        .drop(KEY);
    return hasPayload ? DedupRows.payloadAsText(flagged) : flagged;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    latest = getHandle().getValueState("latest_arrival", Encoders.LONG(),
        TTLConfig.apply(Duration.ofMillis(ttlMillis)));
  }

  @Override
  public void handleInitialState(String eventId, Long latestArrival, TimerValues timerValues) {
    Long kept = latest.get();  // null when absent: one lookup, not exists() then get()
    latest.update(kept == null ? latestArrival : Math.max(kept, latestArrival));
  }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(String eventId,
      scala.collection.Iterator<Row> rows, TimerValues timerValues) {
    List<Row> copies = new ArrayList<>();
    List<Row> out = new ArrayList<>();
    rows.foreach(row -> fields.isValid(row) ? copies.add(row)
        : out.add(DedupRows.withFlag(row, false)));
    if (copies.isEmpty()) {
      return CollectionConverters.asScala(out.iterator());
    }
    long prior = fields.judge(copies, latest.get(), horizonMicros, out);
    latest.update(prior);
    return CollectionConverters.asScala(out.iterator());
  }
}
