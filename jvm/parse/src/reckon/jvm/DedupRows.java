package reckon.jvm;

import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * What both layouts of the dedup state ({@link BucketedDedupState}, {@link DedupState}) do to
 * the rows passing through them: which group a row is judged in, the arrival order of an
 * event's copies, the verdict column, and the raw line carried as bytes.
 *
 * <p>The rule is {@code reckon.eventtime.is_duplicate_of_recent}: a copy is a duplicate when an
 * earlier copy (in arrival order: arrival, partition, input_file, offset) arrived no more than
 * the horizon before it.
 */
final class DedupRows implements java.io.Serializable {
  private static final long serialVersionUID = 1L;

  /** The raw line goes through the state as bytes: converting each row to a Java object and
   * back then copies it, where as text it would be decoded from UTF-8 and encoded again. */
  static final String PAYLOAD = "payload";

  /** Keys of quarantined rows start with it (a valid id equal to such a key would only share
   * the group: each row is judged by its own reason). */
  private static final String QUARANTINED = "\u0000q\u0000";

  final int eventId;
  private final int arrival;
  private final int reason;
  private final int partition;
  private final int inputFile;
  private final int offset;

  DedupRows(StructType schema) {
    this.eventId = schema.fieldIndex("event_id");
    this.arrival = schema.fieldIndex("arrival_us");
    this.reason = schema.fieldIndex("reason");
    this.partition = schema.fieldIndex("partition");
    this.inputFile = schema.fieldIndex("input_file");
    this.offset = schema.fieldIndex("offset");
  }

  /**
   * The group a row is judged in, as a column (a grouping expression needs no conversion of
   * the row to a Java object, as a key function would): its event_id when valid, else its
   * position (partition, offset, input_file), so a bad file never forms one big group.
   */
  static Column groupKey() {
    Column absent = functions.lit("null");
    Column position = functions.concat_ws("\u0000",
        functions.coalesce(functions.col("partition").cast(DataTypes.StringType), absent),
        functions.coalesce(functions.col("offset").cast(DataTypes.StringType), absent),
        functions.coalesce(functions.col("input_file"), absent));
    return functions.when(functions.col("reason").isNull(), functions.col("event_id"))
        .otherwise(functions.concat(functions.lit(QUARANTINED), position));
  }

  static boolean hasPayload(Dataset<Row> rows) {
    return Arrays.asList(rows.columns()).contains(PAYLOAD);
  }

  /** The payload as bytes, on the way into the state. */
  static Dataset<Row> payloadAsBytes(Dataset<Row> rows) {
    return rows.withColumn(PAYLOAD, functions.col(PAYLOAD).cast(DataTypes.BinaryType));
  }

  /** The payload as text again, on the way out. */
  static Dataset<Row> payloadAsText(Dataset<Row> rows) {
    return rows.withColumn(PAYLOAD, functions.col(PAYLOAD).cast(DataTypes.StringType));
  }

  /** Whether the row is valid (reason null): only valid rows are judged and kept in state. */
  boolean isValid(Row row) {
    return row.isNullAt(reason);
  }

  /** Valid rows only (reason null): their arrival_us, partition and offset are set. */
  private Comparator<Row> arrivalOrder() {
    Comparator<Row> order = Comparator.comparingLong(r -> r.getLong(arrival));
    order = order.thenComparingInt(r -> r.getInt(partition));
    order = order.thenComparing(r -> r.getString(inputFile),
        Comparator.nullsFirst(Comparator.naturalOrder()));
    return order.thenComparingLong(r -> r.getLong(offset));
  }

  /**
   * Judges an event's valid copies in arrival order against {@code latestBefore} (its latest
   * arrival in the state, null when absent), adds them with their verdicts to {@code out}, and
   * returns the latest arrival to keep.
   */
  long judge(List<Row> copies, Long latestBefore, long horizonMicros, List<Row> out) {
    if (copies.size() > 1) {
      copies.sort(arrivalOrder());
    }
    Long prior = latestBefore;
    for (Row copy : copies) {
      long at = copy.getLong(arrival);
      out.add(withFlag(copy, prior != null && prior >= at - horizonMicros));
      prior = prior == null ? at : Math.max(prior, at);
    }
    assert prior != null : "judge needs at least one copy";
    return prior;
  }

  /** The row with its verdict appended (the output schema's is_duplicate). */
  static Row withFlag(Row row, boolean duplicate) {
    Object[] values = new Object[row.length() + 1];
    for (int i = 0; i < row.length(); i++) {
      values[i] = row.get(i);
    }
    values[row.length()] = duplicate;
    return RowFactory.create(values);
  }
}
