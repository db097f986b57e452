"""The foreign-key rules read from ``SHOW CREATE TABLE`` text (pure; the live detection is in
``tests/airflow/test_operator_cascades.py``). Texts as MariaDB 10.11 and MySQL 8 print them."""

from __future__ import annotations

import pytest

from airflow_provider_binlog.drain.source import _foreign_key_rules

MARIADB = """CREATE TABLE `c` (
  `id` int(11) NOT NULL,
  `pid` int(11) DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `fk` (`pid`),
  CONSTRAINT `fk` FOREIGN KEY (`pid`) REFERENCES `p` (`id`) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""

MYSQL = "\n".join(
    [
        "CREATE TABLE `c` (",
        "  `id` int NOT NULL,",
        "  `a` int DEFAULT NULL,",
        "  `b` int DEFAULT NULL,",
        "  CONSTRAINT `c_ibfk_1` FOREIGN KEY (`a`, `b`) REFERENCES `other`.`p` (`a`, `b`) "
        "ON DELETE SET NULL ON UPDATE CASCADE,",
        "  CONSTRAINT `odd``name` FOREIGN KEY (`a`) REFERENCES `x ON DELETE CASCADE` (`a`),",
        "  CONSTRAINT `chk` CHECK ((`a` > 0))",
        ") ENGINE=InnoDB",
    ]
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (MARIADB, {"fk": ("CASCADE", "RESTRICT")}),
        (MYSQL, {"c_ibfk_1": ("SET NULL", "CASCADE"), "odd`name": ("RESTRICT", "RESTRICT")}),
        ("CREATE TABLE `t` (\n  `id` int NOT NULL\n)", {}),
    ],
)
def test_foreign_key_rules(text: str, expected: dict[str, tuple[str, str]]) -> None:
    assert _foreign_key_rules(text) == expected
