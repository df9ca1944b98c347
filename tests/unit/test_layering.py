"""Stages import only earlier stages (DESIGN.md, "Layout")."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# module (as installed) -> modules it must never import
FORBIDDEN = {
    "polyc.frontend": ("polyc.backends", "polyc.runtime", "polyc.pipeline", "polyc.api",
                       "polyc.astgen", "polyc.schedule", "polyc.loopnest", "polyc.cli"),
    "polyc.ir": ("polyc.schedule", "polyc.dependence", "polyc.astgen", "polyc.backends",
                 "polyc.runtime", "polyc.pipeline", "polyc.frontend"),
    # statements' access relations sit with the IR, below every stage
    "polyc.access": ("polyc.schedule", "polyc.dependence", "polyc.astgen", "polyc.backends",
                     "polyc.runtime", "polyc.pipeline", "polyc.frontend"),
    "polyc.dependence": ("polyc.schedule", "polyc.astgen", "polyc.backends", "polyc.runtime",
                         "polyc.pipeline"),
    "polyc.schedule": ("polyc.astgen", "polyc.loopnest", "polyc.backends", "polyc.runtime",
                       "polyc.pipeline", "polyc.api"),
    "polyc.astgen": ("polyc.backends", "polyc.runtime", "polyc.pipeline", "polyc.api"),
    "polyc.backends": ("polyc.runtime", "polyc.pipeline", "polyc.api", "polyc.frontend",
                       "polyc.schedule"),
    # pictures read schedules and dependences; a Kernel is drawn through its
    # .schedule; Schedule.plot draws, so the language stays above them (the
    # Schedule class is reached through polyc.schedule.registry)
    "polyc.picture": ("polyc.backends", "polyc.runtime", "polyc.pipeline", "polyc.api",
                      "polyc.astgen", "polyc.cli", "polyc.plot", "polyc.schedule.language"),
    "polyc.plot": ("polyc.backends", "polyc.runtime", "polyc.pipeline", "polyc.api",
                   "polyc.astgen", "polyc.cli", "polyc.schedule.language"),
    # the driver reads the tuning database through these two: they stay below it
    "polyc.tune.use": ("polyc.pipeline", "polyc.api", "polyc.runtime", "polyc.cli",
                       "polyc.tune.search", "polyc.tune.measure"),
    "polyc.tune.db": ("polyc.pipeline", "polyc.api", "polyc.runtime", "polyc.cli",
                      "polyc.tune.search"),
}


def _modules():
    for base, pkg in ((ROOT / "polyc", "polyc"), (ROOT / "frontend", "polyc.frontend"),
                      (ROOT / "backends", "polyc.backends")):
        for path in base.rglob("*.py"):
            rel = path.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            yield ".".join([pkg, *parts]), path


def _imports(name: str, path: Path):
    tree = ast.parse(path.read_text())
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield mod
            for a in node.names:
                yield f"{mod}.{a.name}"


def test_no_stage_imports_a_later_stage():
    bad = []
    for name, path in _modules():
        for prefix, forbidden in FORBIDDEN.items():
            if name != prefix and not name.startswith(prefix + "."):
                continue
            for imp in _imports(name, path):
                if any(imp == f or imp.startswith(f + ".") for f in forbidden):
                    bad.append(f"{path.relative_to(ROOT)} imports {imp}")
    assert not bad, "\n".join(bad)


def test_nothing_installs_top_level_frontend_or_backends():
    cfg = (ROOT / "setup.cfg").read_text()
    assert "polyc.frontend = frontend" in cfg and "polyc.backends = backends" in cfg
    for line in cfg.splitlines():
        assert line.strip() not in ("frontend", "backends"), line


def _local_graph(directory: Path, package: str) -> dict[str, set[str]]:
    """Which modules of ``package`` (the ``*.py`` files of ``directory``, not
    its subpackages) each one imports, at module level or inside a function
    (``TYPE_CHECKING`` blocks included): every ``import`` statement the
    source holds, found with :mod:`ast`."""
    names = {p.stem for p in directory.glob("*.py") if p.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    for name in names:
        deps = set()
        for imp in _imports(f"{package}.{name}", directory / f"{name}.py"):
            if imp.startswith(package + "."):
                head = imp[len(package) + 1:].split(".")[0]
                if head in names and head != name:
                    deps.add(head)
        graph[name] = deps
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules in import order), or ``None``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_schedule_package_imports_form_a_dag():
    """The transformations register through polyc.schedule.registry, so no
    module of polyc/schedule imports one that imports it back, not even
    inside a function."""
    graph = _local_graph(ROOT / "polyc" / "schedule", "polyc.schedule")
    assert {"language", "registry", "transforms"} <= set(graph)
    assert not graph["registry"] & {"transforms", "affine", "fusion", "unroll", "promotion",
                                    "language"}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle in polyc/schedule: " + " -> ".join(cycle)


def test_runtime_pipeline_callplan_form_no_cycle():
    """The runtime never imports the driver, the call plans never import the
    runtime: no cycle of polyc's top-level modules runs through them."""
    graph = _local_graph(ROOT / "polyc", "polyc")
    assert "pipeline" not in graph["runtime"]
    assert "runtime" not in graph["callplan"]
    for start in ("runtime", "pipeline", "callplan"):
        reach, todo = set(), [start]
        while todo:
            for dep in graph[todo.pop()]:
                if dep not in reach:
                    reach.add(dep)
                    todo.append(dep)
        assert start not in reach, f"polyc.{start} imports itself back through {sorted(reach)}"


def test_every_package_is_installed():
    """A wheel gets only the packages setup.cfg lists: each directory with an
    __init__.py must be there (a missing one installs, then fails to import)."""
    cfg = (ROOT / "setup.cfg").read_text()
    listed = set(cfg.split("packages =", 1)[1].split("package_dir", 1)[0].split())
    for base, pkg in ((ROOT / "polyc", "polyc"), (ROOT / "frontend", "polyc.frontend"),
                      (ROOT / "backends", "polyc.backends")):
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            name = ".".join([pkg, *rel.parts])
            assert name in listed, f"{name} is not in setup.cfg's packages"
