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
    "polyc.dependence": ("polyc.schedule", "polyc.astgen", "polyc.backends", "polyc.runtime",
                         "polyc.pipeline"),
    "polyc.schedule": ("polyc.astgen", "polyc.loopnest", "polyc.backends", "polyc.runtime",
                       "polyc.pipeline", "polyc.api"),
    "polyc.astgen": ("polyc.backends", "polyc.runtime", "polyc.pipeline", "polyc.api"),
    "polyc.backends": ("polyc.runtime", "polyc.pipeline", "polyc.api", "polyc.frontend",
                       "polyc.schedule"),
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
