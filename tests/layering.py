"""The layers of `rollout_core` and a checker of its imports against them (tests/test_layering.py runs it).

Each module belongs to the layer of the longest entry naming it or a package holding it ("models" holds
`rollout_core.models.loading`; "models.layer_access" is more specific). A module may import from its own layer or a
lower one, never from a higher one, and the imports must form no cycle. Every import counts: at the top of a file,
inside a function (lazy), under `if TYPE_CHECKING:`. `from rollout_core.x import y` is an import of the module
`rollout_core.x.y` when that is a module, else of `rollout_core.x`; a package's `__init__` is a module of its own (it
runs first when a submodule is imported; keep the ones of low layers free of imports).
docs/ARCHITECTURE.md shows `render()` of this table (tested).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "rollout_core"

LAYERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("ground", "contracts and stdlib-level utilities every layer may use",
     ("errors", "settings", "extras", "paths", "cancel", "lru", "options", "explanation_data", "explanation",
      "models.handle")),
    ("anatomy", "reaching inside a loaded transformer's modules (what model-aware maths needs)",
     ("models.thread_hooks", "models.layer_access")),
    ("maths", "pure torch maths, batched, device-agnostic",
     ("maths",)),
    ("models and inputs", "model folders, loading, families, measured records; safe inputs; data sets",
     ("models", "inputs", "data", "calibration", "reliability")),
    ("capture", "running the model and collecting attentions (full or streaming)",
     ("capture", "lowmem")),
    ("methods", "the method registry: one module per method",
     ("methods",)),
    ("explain", "the explain pipeline and its public entry",
     ("pipeline", "explain")),
    ("serving", "how work runs in a long-lived process: budget, caches, malloc, workers",
     ("serving",)),
    ("views, evaluation, corpus, build", "figures and summaries, faithfulness, corpus runs, building models",
     ("figures", "compare", "summary", "faithfulness", "corpus", "build")),
    ("entry points", "command lines and the warm server; the package's lazy public API",
     ("cli", "__main__", "corpus.cli", "faithfulness.cli_evaluate", "warm", "")),
)

EXCEPTIONS: dict[tuple[str, str], str] = {
    ("explanation", "figures.standalone"):
        # The one upward import allowed: a notebook shows an object through its own `_repr_html_`, and
        # `Explanation.to_html` is the library's one-call HTML export, so the user-facing Explanation reaches up
        # to the figures that draw it (lazily, inside those two methods). No cycle: the figures work on
        # `explanation_data.ExplanationData` and never import `explanation`.
        "Explanation._repr_html_ / to_html draw with figures.standalone",
}
"""(importer, imported) -> why: the only upward imports allowed, each named and explained here."""


@dataclass(frozen=True)
class Import:
    """One import of a module of the package by another: `line` of `importer`'s file."""

    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{_short(self.importer)} -> {_short(self.imported)} (line {self.line})"


def _short(module: str) -> str:
    return module[len(PACKAGE) + 1:] if module.startswith(PACKAGE + ".") else module


def modules(root: Path) -> dict[str, Path]:
    """Module name -> file, for every .py file under the package folder `root`."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(root: Path) -> list[Import]:
    """Every import of one of the package's modules by another, lazy and TYPE_CHECKING ones included."""
    known = modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    found = []
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package
                    for _ in range(node.level - 1):
                        parent = parent.rpartition(".")[0]
                    base = f"{parent}.{base}" if base else parent
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
            else:
                continue
            for target in targets:
                if target.split(".")[0] != PACKAGE:
                    continue
                imported = resolve(target)
                if imported is not None and imported != module:
                    found.append(Import(module, imported, node.lineno))
    return found


def layer_of(module: str) -> int:
    """Index in LAYERS of `module` (a full name): its longest matching entry."""
    name = _short(module) if module != PACKAGE else ""
    best, best_length = None, -1
    for index, (_, _, entries) in enumerate(LAYERS):
        for entry in entries:
            if (entry == name or (entry and name.startswith(entry + "."))) and len(entry) > best_length:
                best, best_length = index, len(entry)
    if best is None:
        raise KeyError(f"{module} is in no layer: add it to tests/layering.py LAYERS and docs/ARCHITECTURE.md")
    return best


def upward(root: Path) -> list[Import]:
    """The imports from a lower layer to a higher one, other than the named EXCEPTIONS."""
    return [i for i in imports(root) if layer_of(i.imported) > layer_of(i.importer)
            and (_short(i.importer), _short(i.imported)) not in EXCEPTIONS]


def unplaced(root: Path) -> list[str]:
    """Modules no LAYERS entry covers."""
    missing = []
    for module in modules(root):
        try:
            layer_of(module)
        except KeyError:
            missing.append(module)
    return missing


def cycles(root: Path) -> list[list[str]]:
    """The import cycles (strongly connected groups of more than one module), each sorted."""
    edges: dict[str, set[str]] = {m: set() for m in modules(root)}
    for i in imports(root):
        edges[i.importer].add(i.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def render() -> str:
    """The layer table as docs/ARCHITECTURE.md shows it, bottom layer first."""
    lines = []
    for number, (name, what, entries) in enumerate(LAYERS):
        shown = ", ".join(f"{e}/" if e and "." not in e and _is_package(e) else (e or "__init__ (public API)")
                          for e in entries)
        lines.append(f"{number}. {name}: {what}\n   {shown}")
    lines.append("Allowed upward imports:")
    lines.extend(f"- {a} -> {b}: {why}" for (a, b), why in EXCEPTIONS.items())
    return "\n".join(lines)


def _is_package(entry: str) -> bool:
    return (Path(__file__).resolve().parents[1] / PACKAGE / entry / "__init__.py").is_file()
