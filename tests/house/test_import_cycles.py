"""No import cycles among bot/'s modules: each module's imports (at module level or inside functions, absolute or
relative) reach back to it through no chain. ``from a import b`` counts as importing ``a.b`` when that is a
module. Imports under ``if TYPE_CHECKING:`` never run and are left out."""

from __future__ import annotations

import ast
from pathlib import Path

BOT = Path(__file__).resolve().parents[2] / "bot"


def _modules() -> dict[str, Path]:
    modules = {}
    for path in BOT.rglob("*.py"):
        parts = path.relative_to(BOT.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _import_nodes(node: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            found.append(child)
        elif _type_checking_only(child):
            found += [n for c in child.orelse for n in _import_nodes(ast.Module(body=[c], type_ignores=[]))]
        else:
            found += _import_nodes(child)
    return found


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(known(alias.name) for alias in node.names)
                continue
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            targets.update(known(f"{source}.{alias.name}") for alias in node.names)
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle (its modules in order), or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str]:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        state[module] = 2
        path.pop()
        return []

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return []


def test_no_module_imports_itself_through_others() -> None:
    cycle = _cycle(_graph(_modules()))
    assert not cycle, " -> ".join(cycle)


def test_the_cycle_check_can_fail() -> None:
    """A guard against a vacuous walk: the graph has the imports, and a cycle is found."""
    graph = _graph(_modules())
    assert "bot.sentinel.kql" in graph["bot.sentinel.queries.incidents"]
    assert "bot.sentinel.queries" in graph["bot.sentinel.client"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
