"""docs/architecture.md stays true to the code, cheaply (no import of the package, no service).

* every path it names exists (``canal/store.py``, ``tests/test_layers.py``, ``canal/meta/``,
  ``README.md``), every ``path:Name`` is defined in that module (``path:Class.method`` too) and
  every ``path::test_name`` is a test of that file; a path followed by ``(planned`` may be missing;
* its level table holds every top-level module and package of ``airflow_provider_binlog``, and no
  import in the package (lazy and ``TYPE_CHECKING`` ones included) points to a higher level;
* Airflow is imported on the Airflow level only, PySpark and py4j in ``lake/`` only;
* the package has no import circle.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "airflow_provider_binlog"
PKG = ROOT / PACKAGE
DOC = ROOT / "docs" / "architecture.md"

# a path: one or more ``dir/`` parts, then maybe a file name; then maybe ``:Name`` or ``::test``
_PATH = re.compile(r"(?<![\w./{}-])((?:[A-Za-z_][\w-]*/)+(?:[\w-]+(?:\.\w+)?)?)(::\w+|:[A-Za-z_][\w.]*\w)?")
# a file at the package's or the repository's root, written without a directory
_ROOT_FILE = re.compile(r"(?<![\w./{}-])([\w-]+\.(?:py|md|toml|sh))(?![\w/])")
_PLANNED = re.compile(r"`? \(planned")


@dataclass(frozen=True)
class Named:
    """A path the document names, with what it says is in it."""

    path: str
    member: str | None  # ``Name`` or ``Class.method`` of ``path:Name``
    test: str | None  # ``test_x`` of ``path::test_x``
    planned: bool


def _tops() -> set[str]:
    """First parts a path in the document may start with: the package's directories and the
    repository's."""
    dirs = {p.name for p in PKG.iterdir() if p.is_dir() and any(p.rglob("*.py"))}
    dirs |= {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")}
    return dirs


def named_paths(text: str, tops: set[str]) -> list[Named]:
    """The paths ``text`` names (see the module docstring)."""
    out = []
    for m in _PATH.finditer(text):
        path, suffix = m.group(1), m.group(2)
        if path.split("/", 1)[0] not in tops:
            continue  # ``put/get/ack`` and such prose
        planned = bool(_PLANNED.match(text, m.end()))
        member = suffix[1:] if suffix and not suffix.startswith("::") else None
        test = suffix[2:] if suffix and suffix.startswith("::") else None
        out.append(Named(path, member, test, planned))
    for m in _ROOT_FILE.finditer(text):
        out.append(Named(m.group(1), None, None, bool(_PLANNED.match(text, m.end()))))
    return out


def _resolve(path: str) -> Path | None:
    for base in (PKG, ROOT):
        if (base / path).exists():
            return base / path
    return None


def _defines(module: Path, member: str) -> bool:
    """Whether ``module`` defines ``Name`` (class, function, assignment) or ``Class.method``."""
    body: list[ast.stmt] = ast.parse(module.read_text()).body
    for part in member.split("."):
        found: ast.stmt | None = None
        for node in body:
            names: list[str] = []
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            if part in names:
                found = node
                break
        if found is None:
            return False
        body = found.body if isinstance(found, ast.ClassDef) else []
    return True


def problems(named: list[Named]) -> list[str]:
    """What the document names that the repository does not have."""
    out = []
    for n in named:
        where = _resolve(n.path)
        if where is None:
            if not n.planned:
                out.append(f"{n.path}: no such file or directory")
            continue
        if n.member is not None and not (where.suffix == ".py" and _defines(where, n.member)):
            out.append(f"{n.path}: defines no {n.member}")
        if n.test is not None and not re.search(rf"^def {re.escape(n.test)}\(", where.read_text(), re.M):
            out.append(f"{n.path}: has no test {n.test}")
    return out


# ---------------------------------------------------------------- the import graph


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(module: str, path: Path, known: Mapping[str, Path]) -> Iterator[tuple[str, int]]:
    """``(imported name, line)`` for every import in the file, anywhere in it; names of the package
    are resolved to the module imported (``from pkg.lake import session`` is ``pkg.lake.session``)."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield (full if full in known else base), node.lineno


def _unit(module: str) -> str:
    """The level-table entry a module belongs to: ``lake/`` or ``errors.py``."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__.py"
    return parts[1] + "/" if (PKG / parts[1]).is_dir() else parts[1] + ".py"


def level_table(text: str) -> dict[str, int]:
    """Entry (``binlog/``, ``cli.py``) -> level, from the first ``text`` block under ``## Layers``."""
    section = text.split("## Layers", 1)[1]
    block = section.split("```text", 1)[1].split("```", 1)[0]
    table: dict[str, int] = {}
    for line in block.splitlines():
        m = re.match(r"(\d+)\s+(.+)$", line)
        if m:
            for entry in m.group(2).split():
                assert entry not in table, f"{entry} is on two levels"
                table[entry] = int(m.group(1))
    return table


def level_of(table: Mapping[str, int], unit: str) -> int | None:
    """The level of ``unit``: its entry, or the first entry that matches it as a glob (``cli*.py``)."""
    if unit in table:
        return table[unit]
    return next((level for entry, level in table.items() if fnmatch.fnmatchcase(unit, entry)), None)


def upward_imports(table: Mapping[str, int]) -> tuple[list[str], list[str]]:
    """``(modules missing from the table, imports that point up)``."""
    known = _modules()
    missing = sorted(u for u in {_unit(m) for m in known} if level_of(table, u) is None)
    up = []
    for module, path in known.items():
        src = level_of(table, _unit(module))
        for name, line in _imports(module, path, known):
            if not name.startswith(PACKAGE + ".") and name != PACKAGE:
                continue
            dst = level_of(table, _unit(name))
            if src is not None and dst is not None and dst > src:
                up.append(f"{path.relative_to(ROOT)}:{line} imports {name} (level {src} -> {dst})")
    return missing, up


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One circle of ``graph``, as a path returning to its start, or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


# ---------------------------------------------------------------- tests


def test_every_path_the_document_names_exists() -> None:
    named = named_paths(DOC.read_text(), _tops())
    paths = {n.path for n in named}
    # the document is read: these are in it (if one is renamed, rename it here too)
    assert {"drain/loop.py", "canal/store.py", "lake/commits.py", "tests/test_layers.py"} <= paths
    assert any(n.member for n in named) and any(n.test for n in named)
    assert problems(named) == []


def test_a_wrong_path_or_name_is_reported() -> None:
    text = (
        "`canal/store.py:EventStore.ack` `canal/no_such.py` `canal/store.py:NoSuch` put/get/ack "
        "`tests/test_layers.py::test_nope` `lake/later.py` (planned) `NOPE.md`"
    )
    assert problems(named_paths(text, _tops())) == [
        "canal/no_such.py: no such file or directory",
        "canal/store.py: defines no NoSuch",
        "tests/test_layers.py: has no test test_nope",
        "NOPE.md: no such file or directory",
    ]


def test_no_import_points_up_a_level() -> None:
    table = level_table(DOC.read_text())
    assert table["binlog/"] < table["canal/"] < table["lake/"] < table["drain/"] < table["operators/"]
    missing, up = upward_imports(table)
    assert missing == [], f"place these in the level table of {DOC.relative_to(ROOT)}: {missing}"
    assert up == []


def test_an_upward_import_is_reported() -> None:
    table = level_table(DOC.read_text())
    turned = {k: (-v if k in ("binlog/", "canal/") else v) for k, v in table.items()}
    _, up = upward_imports(turned)  # canal imports binlog everywhere: now upwards
    assert any("canal/" in line and "imports airflow_provider_binlog.binlog." in line for line in up)


def _third_party(top: str) -> set[str]:
    """Level-table entries whose modules import ``top``."""
    known = _modules()
    return {
        _unit(module)
        for module, path in known.items()
        for name, _ in _imports(module, path, known)
        if name == top or name.startswith(top + ".")
    }


@pytest.mark.parametrize(("top", "allowed"), [("airflow", 5), ("pyspark", 3), ("py4j", 3)])
def test_airflow_and_spark_only_on_their_level(top: str, allowed: int) -> None:
    table = level_table(DOC.read_text())
    users = _third_party(top)
    assert users, f"nothing imports {top}: the check reads nothing"
    assert {u for u in users if level_of(table, u) != allowed} == set()
    if top != "airflow":
        assert users == {"lake/"}


def test_the_package_has_no_import_circle() -> None:
    known = _modules()
    graph = {m: {n for n, _ in _imports(m, p, known) if n in known and n != m} for m, p in known.items()}
    assert graph[f"{PACKAGE}.drain.loop"]  # the graph is read
    assert find_cycle(graph) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
