"""binlog layer."""
