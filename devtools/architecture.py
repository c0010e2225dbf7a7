"""The package's layout, checked: every module of `ablate` in a floor package, imports only
downward (module level, inside functions and under `if TYPE_CHECKING:` alike), no import
circles between modules nor between packages (whatever floor they share), no module over the
line cap. The developer tools (`devtools/`) are checked for circles the same way. `python -m
devtools architecture` prints the report (`--packages`: the package graph, arrow by arrow); the
test suite asserts it (tests/test_architecture.py).

Floors, bottom up: a floor is a list of package prefixes, and a module may import its own floor
and those below. The tree shows them as folders:
0 `ablate/base/`: records, errors, the registry, seeding, locks, durable writes; `base/store/`,
  the results-store port (tracker and store protocols, the run table, the tag vocabulary)
1 `ablate/factors/`: the factor space, its registries, trial specs
2 `ablate/peers/`: other frameworks' spelling of the factors; `ablate/tasks/` (+ templates)
3 what a trial picks by name: `ablate.baselines`, the presets (the repository's `baselines/`,
  installed inside the package), and `ablate/models/`: names, recipes, loading, the fused
  decoder
4 `ablate/rollout/`: the engines (they run the models' fused decoder) and `sample_and_verify`
5 `ablate/stages/`: sampling loop, forward passes, shaping, estimators, update, compute,
  checkpoint; `ablate/zoo/`: building and measuring the zoo's models (with the engine)
6 `ablate/trial/`: the trainer (setup / step / loop), evaluation, the Pass@k sweep, elicitation
7 `ablate/tracking/`: the results stores behind the port, by URL scheme (MLflow, files), and
  the SQL lease table; `ablate/launch/`: launchers by name, the `Launch` record, their options
8 `ablate/study/` (studies, preflight, runner, leases, workers, the Slurm launcher, tuning,
  phases)
9 `ablate/report/`
10 edges: `ablate/commands/` (the CLI), `ablate/testing/`, and the package's own `__init__`
"""

from __future__ import annotations

import ast
import collections
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

#: Each floor's package prefixes, bottom up; a module's floor is that of its longest prefix.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("ablate.base",),
    ("ablate.factors",),
    ("ablate.peers", "ablate.tasks"),
    ("ablate.baselines", "ablate.models"),
    ("ablate.rollout",),
    ("ablate.stages", "ablate.zoo"),
    ("ablate.trial",),
    ("ablate.tracking", "ablate.launch"),
    ("ablate.study",),
    ("ablate.report",),
    ("ablate.commands", "ablate.testing", "ablate"),  # "ablate": the package's __init__ only
)
#: prefix -> floor
PREFIXES: dict[str, int] = {p: floor for floor, ps in enumerate(FLOORS) for p in ps}
#: No module of the package over this many lines, no function over this many.
MAX_LINES = 350
MAX_FUNCTION_LINES = 60


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    kind: str  # "module" | "function" | "type"


def module_names(root: Path, package: str = "ablate") -> dict[str, Path]:
    """Dotted module name -> file, for every module of `package` (a folder of `root`) and of
    its subpackages installed from folders elsewhere (pyproject's setuptools package-dir:
    `ablate.baselines` from `baselines/`)."""
    out = {}
    for prefix, folder in {package: root / package, **_mapped(root, package)}.items():
        for path in sorted(folder.rglob("*.py")):
            name = ".".join((prefix, *path.relative_to(folder).with_suffix("").parts))
            out[name.removesuffix(".__init__")] = path
    return out


def _mapped(root: Path, package: str) -> dict[str, Path]:
    try:
        config = tomllib.loads((root / "pyproject.toml").read_text())
    except FileNotFoundError:
        return {}
    folders = config.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    return {name: root / f for name, f in folders.items() if name.startswith(package + ".")}


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_edges(root: Path, package: str = "ablate") -> list[Edge]:
    """Every import of one module of `package` by another, with where and how it is made."""
    modules = module_names(root, package)
    edges: list[Edge] = []
    for name, path in modules.items():
        edges += _ModuleImports(name, path, modules).edges()
    return edges


class _ModuleImports:
    """The imports of one module, found by walking its syntax tree."""

    def __init__(self, name: str, path: Path, modules: dict[str, Path]) -> None:
        self.name, self.path, self.modules = name, path, modules
        self.package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        self.top = name.partition(".")[0]
        self.found: list[Edge] = []

    def edges(self) -> list[Edge]:
        self._visit(ast.parse(self.path.read_text()), "module")
        return self.found

    def _resolve(self, name: str) -> str | None:
        parts = name.split(".")
        while parts and ".".join(parts) not in self.modules:
            parts.pop()
        return ".".join(parts) or None

    def _targets(self, node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        base = node.module or ""
        if node.level:
            parts = self.package.split(".")
            parts = parts[: len(parts) - node.level + 1]
            base = ".".join([*parts, base] if base else parts)
        full = [f"{base}.{a.name}" for a in node.names]
        return [f if f in self.modules else base for f in full]

    def _visit(self, node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child.test):
                for c in child.body:
                    self._visit_one(c, "type")
                for c in child.orelse:
                    self._visit_one(c, kind)
                continue
            inner = kind
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                inner = "type" if kind == "type" else "function"
            self._visit_one(child, inner)

    def _visit_one(self, node: ast.AST, kind: str) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for target in self._targets(node):
                found = self._resolve(target) if target.split(".")[0] == self.top else None
                if found and found != self.name:
                    self.found.append(Edge(self.name, found, node.lineno, kind))
        self._visit(node, kind)


def floor_of(module: str) -> int | None:
    """The floor of `module`'s longest listed package prefix; None for a module in no floor
    package (a flat `ablate/x.py`: only the package's own `__init__`, "ablate", sits there)."""
    if module == "ablate":
        return PREFIXES[module]
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        floor = PREFIXES.get(".".join(parts[:n]))
        if floor is not None:
            return floor
    return None


def long_functions(root: Path, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """`module.function` -> its line count, for every function over `limit` lines."""
    out = {}
    for name, path in module_names(root).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    out[f"{name}.{node.name}"] = lines
    return out


def unplaced(modules: list[str]) -> list[str]:
    """Modules no floor is declared for (a new module must be placed)."""
    return [m for m in modules if floor_of(m) is None]


def upward(edges: list[Edge]) -> list[Edge]:
    """Imports that reach a higher floor than their module's."""
    return [
        e
        for e in edges
        if None not in (floor_of(e.source), floor_of(e.target))
        and floor_of(e.target) > floor_of(e.source)
    ]


def long_modules(root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """Modules over `limit` lines, with their line counts."""
    counts = {m: len(p.read_text().splitlines()) for m, p in module_names(root).items()}
    return {m: n for m, n in counts.items() if n > limit}


def circles(modules: list[str], edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    graph = collections.defaultdict(set)
    for e in edges:
        graph[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in modules:
        if v not in index:
            connect(v)
    return found


def package_of(module: str) -> str:
    """A module's package in the package graph: `ablate.<name>` (a floor package), or
    `devtools.<name>` (a tool module or subpackage); the top package's `__init__` is its own."""
    return ".".join(module.split(".")[:2])


def package_arrows(edges: list[Edge]) -> dict[tuple[str, str], int]:
    """(importing package, imported package) -> how many imports (of every kind) draw that
    arrow; imports inside one package draw none."""
    pairs = ((package_of(e.source), package_of(e.target)) for e in edges)
    return dict(sorted(collections.Counter(p for p in pairs if p[0] != p[1]).items()))


def package_circles(edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one package: packages that import each
    other, through any modules and on any floors (a shared floor allows sideways imports)."""
    arrows = package_arrows(edges)
    packages = sorted({p for arrow in arrows for p in arrow})
    return circles(packages, [Edge(s, t, 0, "module") for s, t in arrows])


def package_graph(edges: list[Edge]) -> list[str]:
    """The package graph as lines `source -> target  count` (+ `down`, `across floor n` or `UP`
    between floor packages)."""
    return [
        f"{source} -> {target}  {count}{_direction(floor_of(source), floor_of(target))}"
        for (source, target), count in package_arrows(edges).items()
    ]


def _direction(source: int | None, target: int | None) -> str:
    if source is None or target is None:
        return ""
    return "  down" if target < source else "  UP" if target > source else f"  across {source}"


def report(root: Path) -> list[str]:
    """The layout check as lines of text (what `python -m devtools architecture` prints)."""
    modules = list(module_names(root))
    edges = import_edges(root)
    runtime = [e for e in edges if e.kind != "type"]
    lines = [
        f"{len(modules)} modules, {len({(e.source, e.target) for e in runtime})} runtime imports "
        f"({sum(e.kind == 'function' for e in edges)} inside functions), "
        f"{sum(e.kind == 'type' for e in edges)} for type checking only",
    ]
    found = circles(modules, edges)
    lines.append(f"import circles: {len(found)}")
    lines += ["  " + " <-> ".join(c) for c in found]
    found = package_circles(edges)
    lines.append(f"package circles: {len(found)} ({len(package_arrows(edges))} package arrows)")
    lines += ["  " + " <-> ".join(c) for c in found]
    up = sorted(set(upward(edges)), key=lambda e: (e.source, e.line, e.target))
    lines.append(f"imports that reach up a floor: {len(up)}")
    lines += [f"  {e.source}:{e.line} -> {e.target} ({e.kind})" for e in up]
    lines.append(f"modules on no floor: {unplaced(modules)}")
    lines.append(f"modules over {MAX_LINES} lines: {long_modules(root)}")
    lines.append(f"functions over {MAX_FUNCTION_LINES} lines: {long_functions(root)}")
    tools, tool_edges = list(module_names(root, "devtools")), import_edges(root, "devtools")
    found = circles(tools, tool_edges) + package_circles(tool_edges)
    lines.append(f"devtools: {len(tools)} modules, import circles (modules, packages): {found}")
    return lines


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m devtools architecture", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--root", default=".", help="the repository root")
    parser.add_argument(
        "--packages", action="store_true", help="print the package graph, arrow by arrow, instead"
    )
    args = parser.parse_args(argv)
    root = Path(args.root)
    print("\n".join(package_graph(import_edges(root)) if args.packages else report(root)))
    return 0
