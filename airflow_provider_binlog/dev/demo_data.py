"""The demo's source data: a small shop schema with varied column types, and a change generator.

Usable against any MySQL or MariaDB::

    python -m airflow_provider_binlog.dev.demo_data --host 127.0.0.1 --port 3306 --user root \\
        --password-env MYSQL_PWD --changes 500
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from typing import Any

import pymysql

SCHEMA = "shop"
TABLES = {
    "customers": """
        CREATE TABLE IF NOT EXISTS `shop`.`customers` (
            id INT UNSIGNED PRIMARY KEY,
            name VARCHAR(100) NOT NULL,
            email VARCHAR(200) CHARACTER SET latin1,
            tier ENUM('free', 'pro', 'enterprise') NOT NULL DEFAULT 'free',
            balance DECIMAL(14, 4),
            signed_up DATETIME(6),
            last_seen TIMESTAMP(3) NULL,
            active TINYINT(1) NOT NULL DEFAULT 1
        )""",
    "products": """
        CREATE TABLE IF NOT EXISTS `shop`.`products` (
            sku VARCHAR(32) PRIMARY KEY,
            title VARCHAR(200) NOT NULL,
            price DECIMAL(10, 2) NOT NULL,
            weight DOUBLE,
            tags SET('new', 'sale', 'fragile', 'bulk'),
            attrs JSON,
            released DATE,
            thumbnail VARBINARY(64)
        )""",
    "orders": """
        CREATE TABLE IF NOT EXISTS `shop`.`orders` (
            id BIGINT PRIMARY KEY,
            customer_id INT UNSIGNED NOT NULL,
            sku VARCHAR(32) NOT NULL,
            quantity SMALLINT NOT NULL,
            amount DECIMAL(12, 2) NOT NULL,
            status ENUM('new', 'paid', 'shipped', 'cancelled') NOT NULL,
            note TEXT,
            created DATETIME(6) NOT NULL,
            ship_window TIME(3)
        )""",
}
NAMES = [
    "Ada",
    "Grace",
    "Linus",
    "Ken",
    "Barbara",
    "Edsger",
    "Frances",
    "Dennis",
    "Radia",
    "Åsa",
    "Zoë",
    "李雷",
]


def create_schema(conn: pymysql.Connection) -> None:
    """Create the ``shop`` database and its tables if they do not exist."""
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{SCHEMA}`")
        for ddl in TABLES.values():
            cur.execute(ddl)


def recreate_schema(conn: pymysql.Connection) -> str:
    """Drop and create the ``shop`` database and its tables; return the binlog point (``file:pos``)
    just before the creation, where a destination reading them all from the start begins."""
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{SCHEMA}`")
        cur.execute("SHOW MASTER STATUS")
        file, pos, *_ = cur.fetchone()
    create_schema(conn)
    return f"{file}:{pos}"


def _customer(rng: random.Random, cid: int) -> tuple[Any, ...]:
    name = rng.choice(NAMES)
    return (
        cid,
        f"{name} {cid}",
        f"{name.lower()}{cid}@example.com".encode("latin1", "replace").decode("latin1"),
        rng.choice(["free", "pro", "enterprise"]),
        f"{rng.uniform(-1000, 100000):.4f}",
        f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
        f"12:{rng.randint(0, 59):02d}:00.{rng.randint(0, 999999):06d}",
        None
        if rng.random() < 0.2
        else f"2025-06-{rng.randint(1, 28):02d} 08:00:00.{rng.randint(0, 999):03d}",
        rng.randint(0, 1),
    )


def _product(rng: random.Random, n: int) -> tuple[Any, ...]:
    return (
        f"SKU-{n:05d}",
        f"Product {n} \N{SNOWMAN}",
        f"{rng.uniform(1, 500):.2f}",
        None if rng.random() < 0.1 else rng.uniform(0.01, 50),
        ",".join(sorted(rng.sample(["new", "sale", "fragile", "bulk"], rng.randint(0, 3)))),
        json.dumps({"color": rng.choice(["red", "blue"]), "dims": [n % 7, n % 11], "stock": n}),
        f"20{rng.randint(10, 25)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
        bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 16))),
    )


def _order(rng: random.Random, oid: int, customers: int, products: int) -> tuple[Any, ...]:
    q = rng.randint(1, 20)
    return (
        oid,
        rng.randint(1, customers),
        f"SKU-{rng.randint(1, products):05d}",
        q,
        f"{q * rng.uniform(1, 99):.2f}",
        rng.choice(["new", "paid", "shipped", "cancelled"]),
        None if rng.random() < 0.5 else "leave at door",
        f"2025-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} "
        f"1{rng.randint(0, 9)}:00:00.{rng.randint(0, 999999):06d}",
        None if rng.random() < 0.3 else f"{rng.randint(0, 30)}:{rng.randint(0, 59):02d}:00.500",
    )


def generate_changes(conn: pymysql.Connection, changes: int, seed: int = 7) -> dict[str, int]:
    """Write about ``changes`` row changes (inserts, updates, deletes) over the three tables, in
    small multi-statement transactions. Returns how many statements of each kind ran."""
    rng = random.Random(seed)
    counts = {"insert": 0, "update": 0, "delete": 0}
    with conn.cursor() as cur:
        cur.execute("SELECT COALESCE(MAX(id), 0) FROM shop.customers")
        next_customer = int(cur.fetchone()[0]) + 1
        cur.execute("SELECT COUNT(*) FROM shop.products")
        next_product = int(cur.fetchone()[0]) + 1
        cur.execute("SELECT COALESCE(MAX(id), 0) FROM shop.orders")
        next_order = int(cur.fetchone()[0]) + 1
        done = 0
        while done < changes:
            conn.begin()
            for _ in range(rng.randint(1, 5)):
                roll = rng.random()
                if roll < 0.25 or next_customer < 5:
                    cur.execute(
                        "INSERT INTO shop.customers VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
                        _customer(rng, next_customer),
                    )
                    next_customer += 1
                    cur.execute(
                        "INSERT INTO shop.products VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
                        _product(rng, next_product),
                    )
                    next_product += 1
                    counts["insert"] += 2
                elif roll < 0.55:
                    row = _order(rng, next_order, next_customer - 1, next_product - 1)
                    cur.execute("INSERT INTO shop.orders VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)", row)
                    next_order += 1
                    counts["insert"] += 1
                elif roll < 0.85:
                    cur.execute(
                        "UPDATE shop.orders SET status=%s, amount=amount+1 WHERE id=%s",
                        (rng.choice(["paid", "shipped"]), rng.randint(1, max(1, next_order - 1))),
                    )
                    cur.execute(
                        "UPDATE shop.customers SET balance=balance-%s, last_seen=NOW(3), tier=%s WHERE id=%s",
                        (
                            f"{rng.uniform(0, 10):.4f}",
                            rng.choice(["free", "pro"]),
                            rng.randint(1, next_customer - 1),
                        ),
                    )
                    counts["update"] += 2
                else:
                    cur.execute(
                        "DELETE FROM shop.orders WHERE id=%s", (rng.randint(1, max(1, next_order - 1)),)
                    )
                    counts["delete"] += 1
                done += 1
            conn.commit()
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=3306)
    p.add_argument("--user", default="root")
    p.add_argument("--password-env", default="MYSQL_PWD", help="environment variable holding the password")
    p.add_argument("--changes", type=int, default=500)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)
    conn = pymysql.connect(
        host=args.host,
        port=args.port,
        user=args.user,
        password=os.environ.get(args.password_env, ""),
        autocommit=True,
        charset="utf8mb4",
    )
    try:
        create_schema(conn)
        print(generate_changes(conn, args.changes, args.seed))
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
