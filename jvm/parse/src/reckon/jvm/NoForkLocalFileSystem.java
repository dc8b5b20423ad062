package reckon.jvm;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system ({@code file:}) without a child process per file operation.
 *
 * <p>Why: without Hadoop's native library (libhadoop, which no Maven or Debian package ships
 * for this Hadoop), {@link RawLocalFileSystem} runs {@code chmod} in a new process for every
 * file it creates and {@code readlink} for every status a {@code FileContext} asks for (each
 * rename of a Delta commit, a stream checkpoint file, a state store file). A profiled stream
 * started about 280 such processes a micro-batch. Here the same two operations go through
 * {@code java.nio}, in process, with the same results: the mode Hadoop would set (after the
 * umask), and a symlink still resolved by Hadoop's own code.
 *
 * <p>Set for the local master only (spark.session), where the warehouse is a local folder:
 *
 * <pre>
 *   spark.hadoop.fs.file.impl=reckon.jvm.NoForkLocalFileSystem
 *   spark.hadoop.fs.AbstractFileSystem.file.impl=reckon.jvm.NoForkLocalFs
 * </pre>
 */
public final class NoForkLocalFileSystem extends LocalFileSystem {
  public NoForkLocalFileSystem() {
    super(new Raw());
  }

  /** The raw (checksum-less) side: what both {@link NoForkLocalFileSystem} and
   * {@link NoForkLocalFs} delegate to. */
  public static final class Raw extends RawLocalFileSystem {
    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      java.nio.file.Path path = pathToFile(p).toPath();
      int mode = (Integer) Files.getAttribute(path, "unix:mode");
      if ((mode & SET_GROUP_ID) != 0) {
        // a folder of a group-shared warehouse passes its group on to what is made in it
        // (chmod g+s); setting the permission bits alone would clear that
        Files.setAttribute(path, "unix:mode", SET_GROUP_ID | (permission.toShort() & 0777));
        return;
      }
      Files.setPosixFilePermissions(path, posix(permission));
    }

    /** A regular file's or folder's status needs no link lookup; a symlink (rare in a
     * warehouse) gets Hadoop's own answer. */
    @Override
    public FileStatus getFileLinkStatus(Path f) throws IOException {
      File file = pathToFile(f);
      if (Files.isSymbolicLink(file.toPath())) {
        return super.getFileLinkStatus(f);
      }
      return getFileStatus(f);
    }
  }

  /** The POSIX permissions of a Hadoop permission (user, group, other; the sticky bit, which
   * java.nio cannot set, is dropped: Hadoop never sets it on a file it creates). */
  /** The set-group-id bit of a file's mode. */
  static final int SET_GROUP_ID = 02000;

  static Set<PosixFilePermission> posix(FsPermission permission) {
    short mode = permission.toShort();
    PosixFilePermission[] bits = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE,
      PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_EXECUTE,
      PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE,
      PosixFilePermission.OWNER_READ};
    Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
    for (int i = 0; i < bits.length; i++) {
      if ((mode & (1 << i)) != 0) {
        set.add(bits[i]);
      }
    }
    return set;
  }
}
