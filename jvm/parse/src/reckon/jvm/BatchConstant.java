package reckon.jvm;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.api.java.UDF0;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

/**
 * A value that changes every micro-batch (its id, the watermark it is judged against, its
 * processing time) as a column whose generated code is the same in every batch.
 *
 * <p>Why: Spark writes a literal long or timestamp into the Java source it generates and
 * compiles for a plan, and caches the compiled classes by that source. A batch id as a literal
 * makes every batch's plans new source: each batch compiles them again with Janino and runs
 * them in the JVM's interpreter until the JIT catches up. Here the value sits in the plan's
 * reference objects instead, so the source, the compiled class and its JIT-compiled code are
 * reused from batch to batch.
 *
 * <p>Non-deterministic, so the optimizer neither folds it back into a literal nor copies it
 * around; it is a zero-argument call per row that returns the same long.
 *
 * <pre>
 *   Column batchId = BatchConstant.longColumn(42L);   // a long column: 42 in every row
 * </pre>
 */
public final class BatchConstant implements UDF0<Object> {
  private static final long serialVersionUID = 1L;

  private final Object value;

  private BatchConstant(Object value) {
    this.value = value;
  }

  @Override
  public Object call() {
    return value;
  }

  /** The value as a non-null long column (see the class comment). */
  public static Column longColumn(long value) {
    return column(Long.valueOf(value), DataTypes.LongType);
  }

  /** The value as a non-null double column (see the class comment). */
  public static Column doubleColumn(double value) {
    return column(Double.valueOf(value), DataTypes.DoubleType);
  }

  private static Column column(Object value, DataType type) {
    return functions.udf(new BatchConstant(value), type)
        .asNonNullable().asNondeterministic().apply();
  }
}
