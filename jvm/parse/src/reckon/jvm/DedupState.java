package reckon.jvm;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
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
 * The stream's de-duplication rule kept in Spark's state store: per event_id, the latest
 * arrival seen so far, instead of reading the archive's horizon in every micro-batch.
 *
 * <p>Why: with the archive as the memory of past copies, every batch scans rate x horizon
 * rows (3.6M at 1,000 events/s and an hour) to judge a few thousand ids. Kept per key in the
 * state store, a batch costs a lookup per row; the state commits with the batch, so a re-run
 * batch sees what its first run saw.
 *
 * <p>The rule is {@code reckon.eventtime.is_duplicate_of_recent}: a copy is a duplicate when an
 * earlier copy (in arrival order: arrival, partition, input_file, offset) arrived no more than
 * the horizon before it. The state's TTL (processing time) only bounds its size; the verdict
 * compares arrival times, so an entry past the horizon never makes a duplicate. When the state
 * may have forgotten a copy (a new checkpoint, a TTL outrun) is decided in Python
 * ({@code reckon.dedup_state}), which then judges the batch against the archive instead.
 *
 * <p>A quarantined row (non-null {@code reason}) is passed through, never a duplicate, and
 * touches no state: it is keyed by its own position, so a bad file never forms one big group.
 *
 * <p>A new checkpoint's state starts from {@code seed} (event_id, latest_us): the archive's
 * last horizon, applied by Spark in the query's first batch only.
 *
 * <pre>
 *   Dataset&lt;Row&gt; flagged = DedupState.flag(parsed, seed, 3_600_000_000L, Duration.ofHours(3));
 *   // parsed's columns + is_duplicate (boolean)
 * </pre>
 */
public final class DedupState extends StatefulProcessorWithInitialState<String, Row, Row, Long> {
  private static final long serialVersionUID = 1L;

  /** Keys of quarantined rows start with it (a valid id equal to such a key would only share
   * the group: each row is judged by its own reason). */
  private static final String QUARANTINED = "\u0000q\u0000";

  /** The grouping key's column while the rows pass through the state (dropped after it). */
  private static final String KEY = "_dedup_key";

  /** The raw line goes through the state as bytes: converting each row to a Java object and
   * back then copies it, where as text it would be decoded from UTF-8 and encoded again. */
  private static final String PAYLOAD = "payload";

  private final long horizonMicros;
  private final long ttlMillis;
  private final int arrival;
  private final int reasonField;
  private final int[] tieBreak;
  private transient ValueState<Long> latest;

  private DedupState(StructType schema, long horizonMicros, long ttlMillis) {
    this.horizonMicros = horizonMicros;
    this.ttlMillis = ttlMillis;
    this.arrival = schema.fieldIndex("arrival_us");
    this.reasonField = schema.fieldIndex("reason");
    this.tieBreak = new int[] {
      schema.fieldIndex("partition"), schema.fieldIndex("input_file"), schema.fieldIndex("offset")
    };
  }

  /**
   * {@code rows} (with event_id, reason, arrival_us, partition, input_file, offset) and an
   * is_duplicate column, judged against every earlier copy this query's state holds, which
   * starts from {@code seed} (event_id string, latest_us long).
   */
  public static Dataset<Row> flag(Dataset<Row> rows, Dataset<Row> seed, long horizonMicros,
      Duration ttl) {
    boolean hasPayload = Arrays.asList(rows.columns()).contains(PAYLOAD);
    Dataset<Row> keyed = rows.withColumn(KEY, groupKey());
    if (hasPayload) {
      keyed = keyed.withColumn(PAYLOAD, functions.col(PAYLOAD).cast(DataTypes.BinaryType));
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
    return hasPayload
        ? flagged.withColumn(PAYLOAD, functions.col(PAYLOAD).cast(DataTypes.StringType))
        : flagged;
  }

  /**
   * The group of a row, as a column (a grouping expression needs no conversion of the row to a
   * Java object, as a key function would): its event_id when valid, else {@link #QUARANTINED}
   * and its position (partition, offset, input_file).
   */
  private static Column groupKey() {
    Column absent = functions.lit("null");
    Column position = functions.concat_ws("\u0000",
        functions.coalesce(functions.col("partition").cast(DataTypes.StringType), absent),
        functions.coalesce(functions.col("offset").cast(DataTypes.StringType), absent),
        functions.coalesce(functions.col("input_file"), absent));
    return functions.when(functions.col("reason").isNull(), functions.col("event_id"))
        .otherwise(functions.concat(functions.lit(QUARANTINED), position));
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
    rows.foreach(row -> row.isNullAt(reasonField) ? copies.add(row) : out.add(withFlag(row, false)));
    if (copies.isEmpty()) {
      return CollectionConverters.asScala(out.iterator());
    }
    copies.sort(arrivalOrder());
    Long prior = latest.get();  // null when absent
    for (Row copy : copies) {
      long at = copy.getLong(arrival);
      boolean duplicate = prior != null && prior >= at - horizonMicros;
      out.add(withFlag(copy, duplicate));
      prior = prior == null ? at : Math.max(prior, at);
    }
    latest.update(prior);
    return CollectionConverters.asScala(out.iterator());
  }

  /** Valid rows only (reason null): their arrival_us, partition and offset are set. */
  private Comparator<Row> arrivalOrder() {
    Comparator<Row> order = Comparator.comparingLong(r -> r.getLong(arrival));
    order = order.thenComparingInt(r -> r.getInt(tieBreak[0]));
    order = order.thenComparing(r -> r.getString(tieBreak[1]),
        Comparator.nullsFirst(Comparator.naturalOrder()));
    return order.thenComparingLong(r -> r.getLong(tieBreak[2]));
  }

  private static Row withFlag(Row row, boolean duplicate) {
    Object[] values = Arrays.copyOf(new Object[row.length() + 1], row.length() + 1);
    for (int i = 0; i < row.length(); i++) {
      values[i] = row.get(i);
    }
    values[row.length()] = duplicate;
    return RowFactory.create(values);
  }
}
