"""``lake/verify.py``'s key choice follows the server's (against the real MariaDB): without a
declared primary key the server makes its first unique key on NOT NULL columns, in its own key order,
the primary key; the name order of the keys is not that order."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_binlog.lake.verify.verify import choose_key, source_columns, unique_keys

pytestmark = pytest.mark.integration


def test_the_key_the_server_chose_not_the_first_by_name(mariadb: Any, database: str) -> None:
    mariadb.execute(
        f"CREATE TABLE `{database}`.t (a INT NOT NULL, b INT NOT NULL, c INT NULL, n INT NOT NULL, "
        "UNIQUE KEY z_first (b, a), UNIQUE KEY c_nullable (c), UNIQUE KEY a_second (n))"
    )
    conn = mariadb.connect()
    try:
        columns, pk = source_columns(conn, database, "t")
        assert pk == []  # no declared primary key
        keys = unique_keys(conn, database, "t")
        assert keys[0] == ("z_first", ("b", "a"), ()), keys
        assert ("c_nullable", ("c",), ("c",)) in keys, keys
        choice = choose_key(conn, f"{database}.t", columns, pk, None)
        assert choice.columns == ("b", "a") and "z_first" in choice.origin, choice
    finally:
        conn.close()
