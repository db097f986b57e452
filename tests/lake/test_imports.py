"""The lake package's import graph has no circle, lazy imports (inside functions) included."""

from __future__ import annotations

import ast
from pathlib import Path

import airflow_provider_binlog.lake as lake

PACKAGE = "airflow_provider_binlog.lake"


def _type_checking_nodes(tree: ast.AST) -> set[ast.AST]:
    """The import statements under ``if TYPE_CHECKING:``."""
    out: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            out.update(n for stmt in node.body for n in ast.walk(stmt))
    return out


def _imports(path: Path, runtime_only: bool = False) -> set[str]:
    """The lake modules ``path`` imports, anywhere in the file (with ``runtime_only``, not counting
    the imports for type checkers only)."""
    out: set[str] = set()
    tree = ast.parse(path.read_text())
    skip = _type_checking_nodes(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if node in skip:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package itself
                base = f"{PACKAGE}.{base}" if base else PACKAGE
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        out.update(n.removeprefix(PACKAGE + ".") for n in names if n.startswith(PACKAGE + "."))
    return out


def _graph(runtime_only: bool = False) -> dict[str, set[str]]:
    """The lake's modules (sub-packages' included, named from the package down: ``write.merge``)
    and the lake modules each imports."""
    root = Path(lake.__file__).parent
    paths = {
        ".".join(p.relative_to(root).with_suffix("").parts): p
        for p in root.rglob("*.py")
        if p.stem != "__init__"
    }
    return {m: _imports(path, runtime_only) & paths.keys() - {m} for m, path in paths.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` (a path that returns to its start), or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
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


def test_the_cycle_finder_finds_a_lazy_circle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_lake_modules_import_in_one_direction() -> None:
    graph = _graph()
    assert {"write.merge", "spark.session", "spark.class_archive", "spark.jars"} <= graph.keys()
    assert "spark.session" in graph["write.merge"] and "spark.jars" in graph["spark.class_archive"]  # read
    assert _cycle(graph) is None


def test_the_sql_text_routing_and_folding_load_nothing_that_talks_to_spark() -> None:
    graph = _graph(runtime_only=True)

    def below(module: str) -> set[str]:
        seen: set[str] = set()
        todo = [module]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    spark = {"spark.session", "commits", "write.merge", "write.statements", "write.runner", "write.staging"}
    for pure in ("write.merge_sql", "pending", "routes", "collapse", "options"):
        assert not below(pure) & spark, pure
    assert "spark.session" in below("write.statements")  # the test can fail
