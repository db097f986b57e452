package airflow_provider_binlog.hadoop;

/**
 * Hadoop's checksummed local file system ({@code file:}) over {@link ForklessRawLocalFileSystem}:
 * the same files and {@code .crc} side files as {@link org.apache.hadoop.fs.LocalFileSystem}, with
 * permissions set inside the JVM. Named by {@code fs.file.impl} (see lake/local_fs_jar.py).
 */
public class ForklessLocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem {
  public ForklessLocalFileSystem() {
    super(new ForklessRawLocalFileSystem());
  }
}
