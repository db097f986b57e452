"""The main job, until the Airflow operator lands: start MariaDB, write changes, show the binlog.

Run with ``bash dev.sh demo``. Starts a throwaway MariaDB and ZooKeeper, creates a small shop
schema, inserts, updates and deletes rows, and prints the resulting binlog events.
"""

from __future__ import annotations

import sys

from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer

SCHEMA = [
    "CREATE DATABASE shop",
    "CREATE TABLE shop.customers (id INT PRIMARY KEY, name VARCHAR(100), created DATETIME(6))",
    "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, customer_id INT, total DECIMAL(12,2), note JSON)",
]
CHANGES = [
    "INSERT INTO shop.customers VALUES (1, 'Ada', NOW(6)), (2, 'Grace', NOW(6))",
    "INSERT INTO shop.orders VALUES (10, 1, 12.50, '{\"gift\": true}'), (11, 2, 99.99, NULL)",
    "UPDATE shop.orders SET total = total + 1 WHERE id = 10",
    "DELETE FROM shop.orders WHERE id = 11",
]


def main() -> int:
    mariadb = MariaDbServer().start()
    zookeeper = ZooKeeperServer().start()
    try:
        print(f"MariaDB on {mariadb.host}:{mariadb.port}, ZooKeeper on {zookeeper.hosts}")
        for sql in SCHEMA + CHANGES:
            mariadb.execute(sql)
            print(f"  {sql}")
        (file, pos, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
        print(f"\nSHOW BINLOG EVENTS IN '{file}' (head {file}:{pos}):")
        for log_name, start, type_, _server, end, info in mariadb.execute(f"SHOW BINLOG EVENTS IN '{file}'"):
            print(f"  {log_name}:{start:<6} {type_:<20} end={end:<6} {info[:80]}")
        return 0
    finally:
        zookeeper.stop()
        mariadb.stop()


if __name__ == "__main__":
    sys.exit(main())
