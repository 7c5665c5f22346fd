"""Keeps the dependency rules of ARCHITECTURE.md ("Rules the architecture test enforces") true as the code grows.

teams/terminal -> commands -> orchestrator -> tools -> sentinel; tools name their cards, and cards depend on
sentinel's typed data only; the demo workspace (bot/demo) is a backend beside Log Analytics, above sentinel: the data
layer never imports it, and only the composition root (app, __main__) and the terminal build it; turns (durable
delivery, below teams) imports no other bot package (but the leaf bot.lifetime) and no botbuilder; botbuilder only
in teams, openai only in orchestrator, azure.* only in sentinel (plus azure.identity in the composition root,
which builds the one credential every client shares); only config reads the environment. Telemetry:
every layer may use the OpenTelemetry API, but only the composition root installs an SDK or exporter
(opentelemetry.sdk, azure.monitor.opentelemetry), and bot.telemetry depends on no other bot module;
nor does bot.lifetime (a child process dies with its parent), which any layer may use. Surfaces
(teams, terminal) and the commands spell no tool's name: they ask the tool's declaration.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache
from pathlib import Path

BOT = Path(__file__).resolve().parents[2] / "bot"

# package -> bot packages it must not import
FORBIDDEN_INTERNAL = {
    "sentinel": {"tools", "orchestrator", "commands", "teams", "cards", "terminal", "app", "investigation", "demo"},
    # the demo workspace: a backend beside Log Analytics, speaking the data layer's backend protocol
    "demo": {"tools", "orchestrator", "commands", "teams", "cards", "terminal", "app", "investigation", "turns"},
    # the entity investigation: above the data layer, below the tools (its assessment is pure)
    "investigation": {"tools", "orchestrator", "commands", "teams", "cards", "terminal", "app", "turns", "demo"},
    "tools": {"orchestrator", "commands", "teams", "terminal", "app", "demo"},
    "orchestrator": {"commands", "teams", "cards", "terminal", "app", "demo"},
    "cards": {"tools", "orchestrator", "commands", "teams", "terminal", "app", "demo"},
    "commands": {"teams", "cards", "terminal", "app", "demo"},
    "teams": {"terminal", "demo"},
    "terminal": {"teams", "turns"},
    # durable delivery knows turns only as JSON envelopes and the coroutines its caller passes in
    "turns": {"sentinel", "tools", "orchestrator", "cards", "commands", "teams", "terminal", "app", "config",
              "investigation", "demo"},
}
# the only packages that may build the demo workspace (the composition root and the terminal's own workspace)
DEMO_BUILDERS = {"demo", "app", "__main__", "terminal"}
# cards are pure functions of the data layer's typed data (query records, incident changes)
CARD_INPUTS = ("bot.cards", "bot.sentinel.models", "bot.sentinel.changes", "bot.sentinel.params",
               "bot.sentinel.evidence", "bot.investigation.models")
# third-party prefix -> the only places allowed to import it
EXTERNAL_OWNERS = {
    "botbuilder": {"teams"},
    "botframework": {"teams"},
    "openai": {"orchestrator"},
    "azure.monitor": {"sentinel"},
    "azure.monitor.opentelemetry": {"app"},
    "opentelemetry.sdk": {"app"},
    "azure.core": {"sentinel"},
    "azure.identity": {"sentinel", "orchestrator", "app"},
    "azure.storage": {"teams", "turns"},
    "azure.cosmos": {"teams"},
}


def _modules() -> list[tuple[str, Path]]:
    return [(".".join(p.relative_to(BOT.parent).with_suffix("").parts), p) for p in sorted(BOT.rglob("*.py"))]


@cache  # every test reads the same files: each is parsed once
def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports resolved (``from . import x`` names ``package.x``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.ImportFrom):
            base = _relative_base(path, node.level, node.module)
            names.update([base] if node.module else [f"{base}.{alias.name}" for alias in node.names])
    return names


def _relative_base(path: Path, level: int, module: str | None) -> str:
    """The absolute name ``from {'.' * level}{module} import ...`` in ``path`` refers to."""
    package = path.relative_to(BOT.parent).parts[:-1]  # a module's package; an __init__.py's own
    return ".".join([*package[:len(package) - level + 1], *([module] if module else [])])


def _area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_layers_point_one_way() -> None:
    problems = []
    for module, path in _modules():
        banned = FORBIDDEN_INTERNAL.get(_area(module), set())
        for name in _imports(path):
            if name.startswith("bot.") and _area(name) in banned:
                problems.append(f"{module} imports {name}")
            if _area(module) == "cards" and name.startswith("bot.") and name not in CARD_INPUTS \
                    and not name.startswith("bot.cards."):
                problems.append(f"{module} imports {name} (cards may use only the data layer's typed data)")
    assert not problems, problems


# orchestrator sub-package -> the orchestrator modules outside it that it may import: never the loop, the model,
# the memory or the other sub-package (changes names the conversation's type; the conversation stores its pending
# action)
ORCHESTRATOR_PARTS = {
    "factcheck": {"bot.orchestrator.references"},
    "changes": {"bot.orchestrator.references", "bot.orchestrator.conversation"},
}


def test_the_orchestrators_parts_never_reach_back_into_the_loop() -> None:
    problems = []
    for part, allowed in ORCHESTRATOR_PARTS.items():
        inside = f"bot.orchestrator.{part}"
        for module, path in _modules():
            if module != inside and not module.startswith(inside + "."):
                continue
            problems += [f"{module} imports {name}" for name in _imports(path)
                         if (name == "bot.orchestrator" or name.startswith("bot.orchestrator."))
                         and name != inside and not name.startswith(inside + ".") and name not in allowed]
    assert not problems, problems


def test_the_data_layer_never_imports_the_demo() -> None:
    """bot.sentinel holds the queries' demo SQL (beside their KQL) but not the demo workspace that runs it; only the
    composition root and the terminal build the demo."""
    problems = [f"{module} imports {name}" for module, path in _modules() for name in _imports(path)
                if _area(name) == "demo" and name.startswith("bot.") and _area(module) not in DEMO_BUILDERS]
    assert not problems, problems
    assert all("demo" in FORBIDDEN_INTERNAL[area] for area in FORBIDDEN_INTERNAL if area not in DEMO_BUILDERS)


def test_importing_the_live_client_loads_no_demo_module() -> None:
    """What a Log Analytics deployment runs: the client and every query, and none of the demo's generator or store."""
    code = ("import sys, bot.sentinel.client, bot.sentinel.queries; "
            "print(sorted(m for m in sys.modules if m == 'bot.demo' or m.startswith('bot.demo.')))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=BOT.parent, capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout


def _owners(name: str) -> set[str] | None:
    """The owners of the most specific prefix of ``name`` in EXTERNAL_OWNERS (None: anyone may import it)."""
    matches = [prefix for prefix in EXTERNAL_OWNERS if name == prefix or name.startswith(prefix + ".")]
    return EXTERNAL_OWNERS[max(matches, key=len)] if matches else None


def test_sdks_are_imported_only_by_their_owner() -> None:
    problems = []
    for module, path in _modules():
        for name in _imports(path):
            owners = _owners(name)
            if owners is not None and _area(module) not in owners:
                problems.append(f"{module} imports {name} (only {sorted(owners)} may)")
    assert not problems, problems


def test_only_the_composition_root_installs_telemetry() -> None:
    assert _owners("azure.monitor.opentelemetry") == {"app"} and _owners("azure.monitor.query.aio") == {"sentinel"}
    assert "azure.monitor.opentelemetry" in _imports(BOT / "app.py")
    internal = sorted(name for name in _imports(BOT / "telemetry.py") if name == "bot" or name.startswith("bot."))
    assert internal == [], f"bot.telemetry must stay a leaf: it imports {internal}"


def test_only_config_reads_the_environment() -> None:
    offenders = [
        module for module, path in _modules()
        if module != "bot.config" and ("os.environ" in (text := path.read_text(encoding="utf-8")) or "getenv(" in text)
    ]
    assert not offenders, offenders


def test_durable_delivery_knows_no_surface() -> None:
    """bot/turns runs turns it knows only as JSON and coroutines: no Bot Framework SDK, no other bot package."""
    modules = [(module, path) for module, path in _modules() if _area(module) == "turns"]
    assert modules, "bot/turns has no modules"
    problems = [f"{module} imports {name}" for module, path in modules for name in _imports(path)
                if name.split(".")[0] in ("botbuilder", "botframework", "msrest")
                or (name.startswith("bot.") and _area(name) not in ("turns", "lifetime"))]
    assert not problems, problems


def test_lifetime_is_a_leaf() -> None:
    internal = sorted(name for name in _imports(BOT / "lifetime.py") if name == "bot" or name.startswith("bot."))
    assert internal == [], f"bot.lifetime must stay a leaf: it imports {internal}"


def test_relative_imports_are_seen() -> None:
    """``from . import x`` and ``from .x import y`` count as imports of the package's modules."""
    here = BOT / "turns" / "worker.py"
    assert _relative_base(here, 1, "contract") == "bot.turns.contract"
    assert _relative_base(here, 2, "teams") == "bot.teams"
    assert _relative_base(BOT / "turns" / "__init__.py", 1, None) == "bot.turns"


def test_the_rules_can_fail() -> None:
    """A guard against a vacuous walk: the scanner does see imports."""
    assert "bot.sentinel.models" in _imports(BOT / "sentinel" / "client.py")
    assert "azure.monitor.query.aio" in _imports(BOT / "sentinel" / "loganalytics.py")
    assert "bot.demo.backend" in _imports(BOT / "app.py")


# Surfaces and the commands ask a tool's declaration for its card, text and follow-ups (bot/tools), never spell
# its name: a new tool is then one module, and no surface grows a branch for it.
NAMELESS_AREAS = ("teams", "terminal", "commands")


def _tool_name_literals(path: Path, names: frozenset[str]) -> list[tuple[int, str]]:
    """(line, name) of each string literal in ``path`` that is a tool's name (f-string parts included)."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names]


def _tool_names() -> frozenset[str]:
    from bot.tools.registry import TOOLS

    return frozenset(tool.name for tool in TOOLS.tools)


def test_no_surface_spells_a_tool_name() -> None:
    names = _tool_names()
    problems = [f"{module}:{line} spells {name!r}" for module, path in _modules() if _area(module) in NAMELESS_AREAS
                for line, name in _tool_name_literals(path, names)]
    assert not problems, problems


def test_the_tool_name_scan_can_fail() -> None:
    """The scanner does see names where they are declared (the write tools are declared by their name)."""
    names = _tool_names()
    assert {"assign_incident", "query_incidents"} <= names
    found = {name for _, name in _tool_name_literals(BOT / "tools" / "write_tools.py", names)}
    assert "assign_incident" in found and "escalate_incident" in found
