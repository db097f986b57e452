package airflow_provider_binlog.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's raw local file system, with {@link #setPermission} done by {@code java.nio} instead of a
 * {@code chmod} process.
 *
 * <p>Without Hadoop's native library, {@link RawLocalFileSystem} starts a {@code chmod} process for
 * every file it creates and every directory it makes (and the checksummed file system over it
 * creates two files per file). An Iceberg commit on a local warehouse writes five or six files, so a
 * commit started a dozen processes from a JVM of several hundred MB. A mode with the sticky bit, and
 * a file system without POSIX permissions, still go through Hadoop's own code.
 */
public class ForklessRawLocalFileSystem extends RawLocalFileSystem {
  /** Bit i of a mode (others' execute first) and the permission it grants. */
  private static final PosixFilePermission[] BITS = {
    PosixFilePermission.OTHERS_EXECUTE,
    PosixFilePermission.OTHERS_WRITE,
    PosixFilePermission.OTHERS_READ,
    PosixFilePermission.GROUP_EXECUTE,
    PosixFilePermission.GROUP_WRITE,
    PosixFilePermission.GROUP_READ,
    PosixFilePermission.OWNER_EXECUTE,
    PosixFilePermission.OWNER_WRITE,
    PosixFilePermission.OWNER_READ,
  };

  @Override
  public void setPermission(Path p, FsPermission permission) throws IOException {
    short mode = permission.toShort();
    if ((mode & ~0777) != 0) {
      super.setPermission(p, permission);
      return;
    }
    Set<PosixFilePermission> granted = EnumSet.noneOf(PosixFilePermission.class);
    for (int i = 0; i < BITS.length; i++) {
      if ((mode & (1 << i)) != 0) {
        granted.add(BITS[i]);
      }
    }
    try {
      Files.setPosixFilePermissions(pathToFile(p).toPath(), granted);
    } catch (UnsupportedOperationException notPosix) {
      super.setPermission(p, permission);
    }
  }
}
