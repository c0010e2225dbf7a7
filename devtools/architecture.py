"""The package's layout, checked: every module of `ablate` in a floor package, imports only
downward (module level, inside functions and under `if TYPE_CHECKING:` alike), no import
circles, no module over the line cap. `python -m devtools architecture` prints the report; the
test suite asserts it (tests/test_architecture.py).

Floors, bottom up: a floor is a list of package prefixes, and a module may import its own floor
and those below. The tree shows them as folders:
0 `ablate/base/`: records, errors, the registry, seeding, locks, durable writes; `base/store/`,
  the results-store port (tracker and store protocols, the run table, the tag vocabulary)
1 `ablate/factors/` (the factor space, its registries, presets, trial specs) and `ablate/peers/`
2 pieces: `ablate/tasks/` (+ templates), `ablate/models/` (+ the fused decoder), `ablate/rollout/`
3 `ablate/stages/`: sampling loop, forward passes, shaping, estimators, update, compute, checkpoint
4 `ablate/trial/`: the trainer (setup / step / loop), evaluation, the Pass@k sweep, elicitation
5 `ablate/tracking/`: the results stores behind the port, by URL scheme (MLflow, files), and
  the SQL lease table
6 `ablate/study/` (studies, preflight, runner, leases, workers, tuning, phases), `ablate/launch/`
7 `ablate/report/`
8 edges: `ablate/commands/` (the CLI), `ablate/testing/`, and the package's own `__init__`
"""

from __future__ import annotations

import ast
import collections
import sys
from dataclasses import dataclass
from pathlib import Path

#: Each floor's package prefixes, bottom up; a module's floor is that of its longest prefix.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("ablate.base",),
    ("ablate.factors", "ablate.peers"),
    ("ablate.tasks", "ablate.models", "ablate.rollout"),
    ("ablate.stages",),
    ("ablate.trial",),
    ("ablate.tracking",),
    ("ablate.study", "ablate.launch"),
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


def module_names(root: Path) -> dict[str, Path]:
    out = {}
    for path in sorted((root / "ablate").rglob("*.py")):
        name = ".".join(path.relative_to(root).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_edges(root: Path) -> list[Edge]:
    """Every import of one ablate module by another, with where and how it is made."""
    modules = module_names(root)
    edges: list[Edge] = []
    for name, path in modules.items():
        edges += _ModuleImports(name, path, modules).edges()
    return edges


class _ModuleImports:
    """The imports of one module, found by walking its syntax tree."""

    def __init__(self, name: str, path: Path, modules: dict[str, Path]) -> None:
        self.name, self.path, self.modules = name, path, modules
        self.package = name if path.name == "__init__.py" else name.rpartition(".")[0]
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
                found = self._resolve(target) if target.startswith("ablate") else None
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


#: The stages of one RL step in pipeline order, by the modules that implement them.
STAGES = (
    ("sample", ("ablate.stages.batch", "ablate.rollout", "ablate.tasks", "ablate.tasks.templates")),
    ("forward", ("ablate.stages.forward",)),
    ("shape", ("ablate.stages.shaping",)),
    (
        "estimate",
        ("ablate.factors.estimators", "ablate.factors.critic", "ablate.factors.advantages"),
    ),
    ("update", ("ablate.stages.update", "ablate.factors.objective", "ablate.factors.surrogates")),
    ("account", ("ablate.stages.compute",)),
    ("log", ("ablate.stages.diagnostics",)),
)


def stage_of(module: str) -> int | None:
    for index, (_, prefixes) in enumerate(STAGES):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return None


def step_calls(run_step, step_module: str) -> list[tuple[str, str]]:
    """(module, function) of every ablate call the step's own module makes while `run_step()`
    runs, in order (records, the step's own helpers and setup properties included)."""
    calls: list[tuple[str, str]] = []

    def profile(frame, event, arg):
        caller = frame.f_back
        if event != "call" or caller is None:
            return
        if caller.f_globals.get("__name__") != step_module:
            return
        callee = frame.f_globals.get("__name__", "")
        if callee.startswith("ablate") and callee != step_module:
            calls.append((callee, frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        run_step()
    finally:
        sys.setprofile(None)
    return calls


def climbs_back(calls: list[tuple[str, str]]) -> list[str]:
    """The calls into a stage earlier than one the step had already reached."""
    reached, out = -1, []
    for module, function in calls:
        stage = stage_of(module)
        if stage is None:
            continue  # records, setup: data, not a stage
        if stage < reached:
            out.append(f"{module}.{function} ({STAGES[stage][0]} after {STAGES[reached][0]})")
        reached = max(reached, stage)
    return out


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
    up = sorted(set(upward(edges)), key=lambda e: (e.source, e.line, e.target))
    lines.append(f"imports that reach up a floor: {len(up)}")
    lines += [f"  {e.source}:{e.line} -> {e.target} ({e.kind})" for e in up]
    lines.append(f"modules on no floor: {unplaced(modules)}")
    lines.append(f"modules over {MAX_LINES} lines: {long_modules(root)}")
    lines.append(f"functions over {MAX_FUNCTION_LINES} lines: {long_functions(root)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m devtools architecture", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--root", default=".", help="the repository root")
    args = parser.parse_args(argv)
    print("\n".join(report(Path(args.root))))
    return 0
