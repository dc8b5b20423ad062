package reckon.jvm;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import java.io.IOException;
import java.io.ByteArrayOutputStream;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.time.DateTimeException;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.HashSet;
import java.util.Set;
import java.util.regex.Pattern;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataType;

/**
 * The shape rules of reckon's event parse in one pass over a line (spark/parse.py owns the
 * rules and documents them; this is their JVM implementation, called as a Spark UDF).
 *
 * <p>Why a UDF: the same rules as Spark expressions parse each line three or four times
 * (the fields, the one-value proof, the keys, the amount's own digits) and evaluate about
 * forty string expressions. Here one Jackson streaming pass reads the line once.
 *
 * <p>A text field reads as Spark's from_json reads a value into a string field: a JSON string
 * is its text, null is null, anything else is the text Jackson writes for it (a number as
 * a double prints, an object compactly). An amount sent as a JSON number is judged by its
 * exact value (its own digits, never a double): 12.5 and 1.5e2 are amounts, 1.0005 is not.
 *
 * <p>Output, one struct per line: the text fields, the amount (decimal(p, s)), event_time and
 * the line's own arrival_time as epoch microseconds, the partition as an int, the raw
 * partition and arrival_time texts (for the rules that need the transport's columns, which
 * Spark applies), and the first failing shape rule's reason and detail (both null when the
 * line passes every shape rule).
 */
public final class ParseLine implements UDF1<String, Row> {
  private static final long serialVersionUID = 1L;

  /** The fields read from a line, in the output's order. */
  public static final String[] FIELDS = {
    "event_id", "key", "amount", "currency", "event_time", "source", "partition", "arrival_time"
  };
  /** The fields an event must have (missing_field), in the order its detail lists them. */
  public static final String[] REQUIRED = {
    "event_id", "key", "amount", "currency", "event_time", "source"
  };
  /** The identifier fields: an object or array there is wrong_type; too long is too long. */
  public static final String[] TEXT_FIELDS = {"event_id", "key", "source", "currency"};
  private static final int AMOUNT = 2; // FIELDS[AMOUNT]

  private static final Pattern BLANK_LINE = Pattern.compile("^\\s*$");
  // only white space, separators (a no-break space) or invisible format characters, the
  // whole value (matches(): a final line terminator is not blank unless it is white space)
  private static final Pattern BLANK = Pattern.compile("[\\s\\p{Z}\\p{Cf}]*");
  private static final Pattern NESTED = Pattern.compile("^\\s*[\\[{]");
  private static final Pattern PARTITION = Pattern.compile("^\\d{1,9}$");
  // As Spark's from_json reads (NaN and infinities allowed) and writes a non-string value
  // back to text (UTF-8, surrogate pairs escaped, a double as Double.toString).
  private static final JsonFactory JSON = JsonFactory.builder()
      .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
      .build();

  private final int maxFieldLength;
  private final int integerDigits;
  private final int scale;
  private final Pattern amountPattern;

  /**
   * @param maxFieldLength the most characters an identifier may have
   * @param integerDigits the most digits before an amount's decimal point
   * @param scale the most digits after it (the stored decimal's scale)
   */
  public ParseLine(int maxFieldLength, int integerDigits, int scale) {
    this.maxFieldLength = maxFieldLength;
    this.integerDigits = integerDigits;
    this.scale = scale;
    this.amountPattern = Pattern.compile(
        "^-?\\d{1," + integerDigits + "}(\\.\\d{1," + scale + "})?$");
  }

  /**
   * Register a parser as the session's temporary function {@code name}.
   *
   * <p>Why here and not through py4j: {@code functions.udf} is overloaded (a Java UDF1 and an
   * untyped Scala closure both match this object), and py4j's choice between them can differ
   * from one JVM to the next; the untyped one is refused. Called from Java, the UDF1 overload
   * is the one the compiler binds.
   *
   * <p>Registered as non-deterministic, though it is not: that keeps the optimizer from
   * copying the call into a filter above it (the line would be parsed twice).
   *
   * @param schema the output struct (spark/parse.py's _LINE_SCHEMA)
   */
  public static void register(SparkSession spark, String name, DataType schema,
                              int maxFieldLength, int integerDigits, int scale) {
    UserDefinedFunction function = functions.udf(
        new ParseLine(maxFieldLength, integerDigits, scale), schema).asNondeterministic();
    spark.udf().register(name, function);
  }

  /** The values of one line's fields, read once. */
  private static final class Fields {
    final String[] text = new String[FIELDS.length];
    boolean amountIsNumber; // the amount was a JSON number, not a string
    BigDecimal amountNumber; // its exact value (null for NaN and the infinities)
    boolean duplicateKeys;
    String notOneObject; // why the line is not exactly one JSON object, or null
  }

  @Override
  public Row call(String line) {
    if (line != null && line.indexOf('{') < 0 && BLANK_LINE.matcher(line).find()) {
      return RowFactory.create(null, null, null, null, null, null, null, null, null, null,
                               "empty_line", "blank line");
    }
    return judge(read(line));
  }

  // ------------------------------------------------------------------ reading the line
  /** The line's fields, and why it is not exactly one JSON object if it is not. A line
   * that holds a whole object (duplicate keys, or more after it) keeps the fields it read,
   * so its quarantined row shows what it said; a line that is not JSON keeps none, as
   * Spark's from_json keeps none. */
  private static Fields read(String line) {
    if (line == null) {
      return notJson();
    }
    Fields f = new Fields();
    try (JsonParser p = JSON.createParser(line)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        return notJson();
      }
      Set<String> keys = new HashSet<>();
      JsonToken t;
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        f.duplicateKeys |= !keys.add(name);
        p.nextToken();
        int i = indexOf(name);
        if (i < 0) {
          p.skipChildren();
        } else {
          f.text[i] = valueText(p);
          if (i == AMOUNT && p.currentToken().isNumeric()) {
            f.amountIsNumber = true;
            f.text[i] = p.getText(); // the number as sent, not as a double prints it
            f.amountNumber = exactNumber(p);
          }
        }
      }
      if (t != JsonToken.END_OBJECT) {
        return notJson();
      } else if (f.duplicateKeys) {
        f.notOneObject = "duplicate keys in the JSON object";
      } else if (!endsHere(p)) {
        f.notOneObject = "more than one JSON value on the line";
      }
    } catch (IOException e) { // JsonProcessingException: not JSON
      return notJson();
    }
    return f;
  }

  private static Fields notJson() {
    Fields f = new Fields();
    f.notOneObject = "not a JSON object";
    return f;
  }

  /** Nothing but white space follows the object. */
  private static boolean endsHere(JsonParser p) {
    try {
      return p.nextToken() == null;
    } catch (IOException e) {
      return false;
    }
  }

  private static int indexOf(String name) {
    for (int i = 0; i < FIELDS.length; i++) {
      if (FIELDS[i].equals(name)) {
        return i;
      }
    }
    return -1;
  }

  /** The value as from_json reads it into a string field (see the class comment). */
  private static String valueText(JsonParser p) throws IOException {
    JsonToken t = p.currentToken();
    if (t == JsonToken.VALUE_STRING) {
      return p.getText();
    }
    if (t == JsonToken.VALUE_NULL) {
      return null;
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (JsonGenerator g = JSON.createGenerator(out, JsonEncoding.UTF8)) {
      g.copyCurrentStructure(p);
    }
    return out.toString(StandardCharsets.UTF_8);
  }

  /** A JSON number's exact value, from its own digits (not through a double). */
  private static BigDecimal exactNumber(JsonParser p) throws IOException {
    try {
      return p.getDecimalValue();
    } catch (NumberFormatException e) {
      return null; // NaN and the infinities have no decimal value
    }
  }

  // ------------------------------------------------------------------ the rules
  private Row judge(Fields f) {
    String[] v = f.text;
    String amountText = v[AMOUNT];
    BigDecimal amount = f.amountIsNumber ? numberAmount(f.amountNumber)
        : amountText != null && amountPattern.matcher(amountText).find()
        ? decimal(amountText) : null;
    Long eventMicros = isoMicros(v[4]);
    Integer partition = v[6] != null && PARTITION.matcher(v[6]).find()
        ? Integer.valueOf(Integer.parseInt(trimmed(v[6]))) : null;
    Long arrivalMicros = isoMicros(v[7]);
    String reason = f.notOneObject == null ? null : "invalid_json";
    String detail = f.notOneObject;
    if (reason != null) {
      return RowFactory.create(v[0], v[1], amount, v[3], eventMicros, v[5], partition, v[6],
                               arrivalMicros, v[7], reason, detail);
    }
    String missing = listed(REQUIRED, v, ParseLine::isMissing);
    String nested = missing == null ? listed(TEXT_FIELDS, v, ParseLine::isNested) : null;
    String tooLong = missing == null && nested == null
        ? listed(TEXT_FIELDS, v, this::isTooLong) : null;
    if (missing != null) {
      reason = "missing_field";
      detail = "missing or empty: " + missing;
    } else if (nested != null) {
      reason = "wrong_type";
      detail = "an object or array where text belongs: " + nested;
    } else if (tooLong != null) {
      reason = "field_too_long";
      detail = "longer than " + maxFieldLength + " characters: " + tooLong;
    } else if (amount == null) {
      reason = "bad_amount";
      detail = "amount is not a decimal with at most " + integerDigits
          + " digits before the point and " + scale + " after: " + prefix(amountText, 40);
    } else if (eventMicros == null) {
      reason = "bad_event_time";
      detail = "event_time is not ISO-8601 with a zone: " + prefix(v[4], 60);
    }
    return RowFactory.create(v[0], v[1], amount, v[3], eventMicros, v[5], partition, v[6],
                             arrivalMicros, v[7], reason, detail);
  }

  private interface Test {
    boolean holds(String value);
  }

  /** The names of the fields whose value fails the test, comma-separated; null if none. */
  private static String listed(String[] names, String[] values, Test test) {
    StringBuilder out = null;
    for (String name : names) {
      if (test.holds(values[indexOf(name)])) {
        out = out == null ? new StringBuilder(name) : out.append(',').append(name);
      }
    }
    return out == null ? null : out.toString();
  }

  private static boolean isMissing(String value) {
    if (value == null || value.isEmpty()) {
      return true;
    }
    char first = value.charAt(0);
    if (first > ' ' && first < 0x7f) {
      return false;  // printable ASCII is neither white space, a separator nor a format char
    }
    return BLANK.matcher(value).matches();
  }

  private static boolean isNested(String value) {
    return value != null && (value.indexOf('[') >= 0 || value.indexOf('{') >= 0)
        && NESTED.matcher(value).find();
  }

  private boolean isTooLong(String value) {
    return value != null && value.length() > maxFieldLength
        && value.codePointCount(0, value.length()) > maxFieldLength;
  }

  /** A matched value without the line terminator the pattern's '$' lets through, when
   * Spark's cast trims it too (control characters up to the space). */
  private static String trimmed(String value) {
    int end = value.length();
    while (end > 0 && value.charAt(end - 1) <= ' ') {
      end--;
    }
    return value.substring(0, end);
  }

  private BigDecimal decimal(String text) {
    try {
      return new BigDecimal(trimmed(text)).setScale(scale, RoundingMode.HALF_UP);
    } catch (NumberFormatException e) {
      return null;
    }
  }

  /** A JSON number as an amount: its exact value, when that has at most ``scale`` places
   * and ``integerDigits`` digits before the point (12.5, 1.5e2 and 1.0000 are amounts; 1.0005
   * and 1e15 are not), else null. */
  private BigDecimal numberAmount(BigDecimal value) {
    if (value == null) {
      return null;
    }
    BigDecimal plain = value.stripTrailingZeros();
    if (plain.scale() > scale || plain.precision() - plain.scale() > integerDigits) {
      return null;
    }
    return plain.setScale(scale, RoundingMode.UNNECESSARY);
  }

  private static String prefix(String text, int n) {
    if (text == null) {
      return null;
    }
    return text.codePointCount(0, text.length()) <= n
        ? text : text.substring(0, text.offsetByCodePoints(0, n));
  }

  /** Strict ISO-8601 with a zone, as epoch microseconds; null when not one or no such
   * instant (a 30th of February, hour 24, an offset past 18:00), as Spark's cast. The form is
   * {@code yyyy-MM-ddTHH:mm:ss[.f{1,6}](Z|+HH:MM|-HH:MM)}, read by position: every line has
   * one, and a regular expression per line was a visible share of the parse. */
  static Long isoMicros(String text) {
    if (text == null) {
      return null;
    }
    String value = trimmed(text);
    int n = value.length();
    if (n < 20 || !isoDateTime(value)) {
      return null;
    }
    int i = 19;
    int nanos = 0;
    if (value.charAt(i) == '.') {
      int first = ++i;
      while (i < n && isDigit(value.charAt(i))) {
        i++;
      }
      if (i == first || i - first > 6) {
        return null;
      }
      nanos = Integer.parseInt((value.substring(first, i) + "00000000").substring(0, 9));
    }
    String zone = value.substring(i);
    if (!isZone(zone)) {
      return null;
    }
    try {
      LocalDateTime local = LocalDateTime.of(number(value, 0, 4), number(value, 5, 7),
          number(value, 8, 10), number(value, 11, 13), number(value, 14, 16),
          number(value, 17, 19), nanos);
      ZoneOffset offset = "Z".equals(zone) ? ZoneOffset.UTC : ZoneOffset.of(zone);
      long seconds = local.toEpochSecond(offset);
      return Long.valueOf(Math.addExact(Math.multiplyExact(seconds, 1_000_000L), nanos / 1000));
    } catch (DateTimeException | ArithmeticException e) {
      return null;
    }
  }

  /** {@code yyyy-MM-ddTHH:mm:ss} at the start (ASCII digits, as the pattern's \d). */
  private static boolean isoDateTime(String v) {
    String shape = "dddd-dd-ddTdd:dd:dd";
    for (int i = 0; i < shape.length(); i++) {
      char want = shape.charAt(i);
      char got = v.charAt(i);
      if (want == 'd' ? !isDigit(got) : got != want) {
        return false;
      }
    }
    return true;
  }

  /** {@code Z}, or a sign and {@code HH:MM}, and nothing after it. */
  private static boolean isZone(String zone) {
    if ("Z".equals(zone)) {
      return true;
    }
    return zone.length() == 6 && (zone.charAt(0) == '+' || zone.charAt(0) == '-')
        && isDigit(zone.charAt(1)) && isDigit(zone.charAt(2)) && zone.charAt(3) == ':'
        && isDigit(zone.charAt(4)) && isDigit(zone.charAt(5));
  }

  private static boolean isDigit(char c) {
    return c >= '0' && c <= '9';
  }

  private static int number(String v, int from, int to) {
    int result = 0;
    for (int i = from; i < to; i++) {
      result = result * 10 + (v.charAt(i) - '0');
    }
    return result;
  }
}
