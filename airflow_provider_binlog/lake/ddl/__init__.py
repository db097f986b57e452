"""Table DDL of the targets and the lake actions of a source's DDL statements."""
