-- The replication user the provider connects as: only what a replica needs, plus SELECT for
-- snapshots and schema lookups.
CREATE USER 'cdc_repl'@'%' IDENTIFIED BY 'cdc_repl';
GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'cdc_repl'@'%';
