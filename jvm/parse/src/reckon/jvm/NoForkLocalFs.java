package reckon.jvm;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.AbstractFileSystem;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/**
 * The {@code FileContext} side of {@link NoForkLocalFileSystem}: what Spark's stream
 * checkpoints and Delta's commits use to create and rename files on {@code file:}. The same
 * shape as Hadoop's {@code LocalFs} (checksums over a raw file system), with the raw side
 * replaced by {@link NoForkLocalFileSystem.Raw}.
 *
 * <pre>
 *   spark.hadoop.fs.AbstractFileSystem.file.impl=reckon.jvm.NoForkLocalFs
 * </pre>
 */
public final class NoForkLocalFs extends ChecksumFs {
  public NoForkLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
    super(raw(uri, conf));
  }

  private static AbstractFileSystem raw(URI uri, Configuration conf)
      throws IOException, URISyntaxException {
    return new Raw(uri, conf);
  }

  /** As Hadoop's {@code RawLocalFs}, over {@link NoForkLocalFileSystem.Raw}. */
  static final class Raw extends DelegateToFileSystem {
    Raw(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(uri, new NoForkLocalFileSystem.Raw(), conf, "file", false);
    }

    @Override
    public int getUriDefaultPort() {
      return -1;
    }

    @Override
    @SuppressWarnings("deprecation")
    public FsServerDefaults getServerDefaults() throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    public FsServerDefaults getServerDefaults(Path f) throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    public boolean isValidName(String src) {
      return true;  // local file names may hold ':' and the like
    }
  }
}
