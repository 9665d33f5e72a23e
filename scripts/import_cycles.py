#!/usr/bin/env python3
"""Print the package's import circles: strongly connected components of its module graph.

Every import counts, wherever it is written: at module level, inside functions (lazy imports) and
under ``if TYPE_CHECKING:``. A lazy or type-only import does not fail at import time, but it still
ties the two modules together, so it is as much a circle as a top-level one.

Usage: ``python scripts/import_cycles.py [--package pyspark_logsource] [--root .] [--allow A,B ...]``;
exits 1 when a circle is found that is not allowed (0 otherwise). ``--allow`` names the modules of one
circle that is accepted as it is (the filesystem plug-in registry, ``make lint``): exactly that circle,
not a larger one that contains it. Each circle is printed with the imports that close it
(``a -> b (line 12, lazy)``).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package by dotted name (a package is its ``__init__``)."""
    out: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking_lines(tree: ast.Module) -> set[int]:
    """Line numbers of the imports under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            if (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
                isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
            ):
                for sub in node.body:
                    for n in ast.walk(sub):
                        if isinstance(n, (ast.Import, ast.ImportFrom)):
                            lines.add(n.lineno)
    return lines


def _function_lines(tree: ast.Module) -> set[int]:
    """Line numbers of the imports inside a function body (lazy imports)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for n in ast.walk(node):
                if isinstance(n, (ast.Import, ast.ImportFrom)):
                    lines.add(n.lineno)
    return lines


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The package module that importing ``name`` loads (its longest known prefix)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(mod: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int, str]]:
    """(imported package module, line, kind) for every import in one module.

    kind: top (module level), lazy (inside a function), type (under TYPE_CHECKING), string (a
    module's full dotted name written as a string in a module that calls importlib.import_module).
    Names built at run time are not followed: client/__init__'s PEP 562 table is mirrored by its
    TYPE_CHECKING imports, which are.
    """
    tree = ast.parse(path.read_text(), str(path))
    typed = _type_checking_lines(tree)
    lazy = _function_lines(tree)
    is_pkg = path.name == "__init__.py"
    dynamic = any(
        isinstance(n, ast.Call)
        and (getattr(n.func, "attr", None) or getattr(n.func, "id", None)) in ("import_module", "__import__")
        for n in ast.walk(tree)
    )
    for node in ast.walk(tree):
        kind = (
            "type"
            if getattr(node, "lineno", 0) in typed
            else "lazy"
            if getattr(node, "lineno", 0) in lazy
            else "top"
        )
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, modules)
                if target:
                    yield target, node.lineno, kind
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # Relative: level 1 is the module's own package (a package's __init__ is that package).
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                # ``from pkg import sub`` imports the submodule pkg.sub when there is one.
                target = (
                    _resolve(f"{prefix}.{alias.name}", modules)
                    if f"{prefix}.{alias.name}" in modules
                    else None
                )
                target = target or _resolve(prefix, modules)
                if target:
                    yield target, node.lineno, kind
        elif (
            dynamic
            and isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in modules
        ):
            # A module that imports by name (importlib.import_module): every package module it
            # names in a string may be imported (cli.py's command table).
            yield node.value, node.lineno, "string"


def build_graph(root: Path, package: str) -> dict[str, dict[str, list[tuple[int, str]]]]:
    """module -> {imported module: [(line, kind), ...]}, self-imports left out."""
    modules = module_files(root, package)
    graph: dict[str, dict[str, list[tuple[int, str]]]] = {m: {} for m in modules}
    for mod, path in modules.items():
        for target, line, kind in imports_of(mod, path, modules):
            if target == mod:
                continue
            where = graph[mod].setdefault(target, [])
            if (line, kind) not in where:
                where.append((line, kind))
    return graph


def strongly_connected(graph: dict[str, dict[str, list[tuple[int, str]]]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative); components of more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph[w])))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", default="pyspark_logsource")
    ap.add_argument("--root", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="A,B",
        help="the comma-separated modules of a circle that is accepted (repeatable)",
    )
    args = ap.parse_args(argv)
    allowed = [sorted(a.split(",")) for a in args.allow]
    graph = build_graph(Path(args.root), args.package)
    comps = strongly_connected(graph)
    for comp in comps:
        members = set(comp)
        print(f"circle of {len(comp)}: {', '.join(comp)}")
        for a in comp:
            for b, where in sorted(graph[a].items()):
                if b in members:
                    desc = ", ".join(f"line {line}, {kind}" for line, kind in where)
                    print(f"    {a} -> {b} ({desc})")
    print(f"{len(comps)} import circle(s) in {args.package}")
    unexpected = [c for c in comps if c not in allowed]
    if unexpected and allowed:
        print(f"{len(unexpected)} of them not allowed")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
