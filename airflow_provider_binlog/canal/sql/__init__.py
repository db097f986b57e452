"""The SQL the binlog carries, read without a server: the tokens (:mod:`.tokens`), DDL statements
(:mod:`.ddl`), partitioning clauses (:mod:`.partitions`), the tables a statement-format DML writes
(:mod:`.statement`) and a DDL's classification into lake actions (:mod:`.operations`).
"""
