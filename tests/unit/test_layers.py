"""The package's layers: the folder tree is the architecture diagram (issue 25).

Every module under `langgraph_ctx/` (the runtime) and `tools/langgraph_ctx_tools/` (the tools a
person runs, their own distribution) is parsed with `ast`. Its imports of the package, imports
inside functions included and `if TYPE_CHECKING:` blocks left out, must go to its own layer or
to a layer below it (`LAYERS`, bottom to top) and never round in a circle. A module is one
concept and its size follows from it (issue 54 retired the line cap). No module exists only to
re-export another's names: a module lists in `__all__` only names it defines, and only the
package's `__init__` and its subpackages' `__init__` gather names defined elsewhere (issue 36).
The runtime never imports the tools (issue 54): a deployment installs the runtime alone.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "langgraph_ctx"
TOOLS = ROOT / "tools" / "langgraph_ctx_tools"
PACKAGES = (PACKAGE, TOOLS)
"""The runtime and the tools: their modules, each named from its own package's parent."""
TOP_NAMES = frozenset(p.name for p in PACKAGES)

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # (layer, module prefixes), bottom to top: a module imports only from its layer or below.
    (
        "base",
        (
            "langgraph_ctx.errors",
            "langgraph_ctx.checks",
            "langgraph_ctx._lru",
            "langgraph_ctx._effects",
            "langgraph_ctx._ids",
            "langgraph_ctx._patterns",
            "langgraph_ctx.scripted",
        ),
    ),
    ("messages", ("langgraph_ctx.messages",)),
    ("ledger", ("langgraph_ctx.ledger",)),
    ("tokens", ("langgraph_ctx.tokens",)),
    ("prompt", ("langgraph_ctx.prompt",)),
    ("strategies", ("langgraph_ctx.strategies",)),
    ("summaries", ("langgraph_ctx.summaries",)),
    ("archive", ("langgraph_ctx.archive",)),
    ("pipeline", ("langgraph_ctx.pipeline",)),
    ("graph", ("langgraph_ctx.graph",)),
    ("api", ("langgraph_ctx",)),  # the package's own __init__: the public names
    # The tools' distribution, above the whole runtime.
    ("tools", ("langgraph_ctx_tools",)),  # its own __init__: what both tool layers share
    ("replay", ("langgraph_ctx_tools.replay",)),
    ("cli", ("langgraph_ctx_tools.cli",)),
)


def _name(path: Path) -> str:
    package = next(p for p in PACKAGES if path.is_relative_to(p))
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    return {_name(p): p for package in PACKAGES for p in sorted(package.rglob("*.py"))}


@cache
def _tree(module: str) -> ast.Module:
    return ast.parse(_modules()[module].read_text(encoding="utf-8"))


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(
    node: ast.AST, *, type_only: bool = False
) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under `node`, functions included, `if TYPE_CHECKING:` left out
    unless `type_only`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child) and not type_only:
            for other in child.orelse:
                yield from _import_nodes(ast.Module(body=[other], type_ignores=[]))
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        yield from _import_nodes(child, type_only=type_only)


def _imports(module: str, *, type_only: bool = False) -> set[str]:
    """The package modules `module` imports (a name imported from a package that is a module
    of it counts as that module); with `type_only`, its `if TYPE_CHECKING:` imports too."""
    modules = _modules()
    is_package = modules[module].name == "__init__.py"
    found: set[str] = set()
    for node in _import_nodes(_tree(module), type_only=type_only):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] in TOP_NAMES)
            continue
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source = node.module or ""
        if source.split(".")[0] not in TOP_NAMES:
            continue
        for alias in node.names:
            found.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source)
    found.discard(module)
    return found


def _layer(module: str) -> int:
    """The index in `LAYERS` of the module's layer (the longest prefix that names it)."""
    best, length = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or (
                prefix not in ("langgraph_ctx", "langgraph_ctx_tools")
                and module.startswith(prefix + ".")
            )
            if matches and len(prefix) > length:
                best, length = index, len(prefix)
    return best


def _graph(*, type_only: bool = False) -> dict[str, set[str]]:
    return {m: _imports(m, type_only=type_only) for m in _modules()}


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in _modules() if _layer(m) < 0]
    assert unplaced == [], f"modules in no layer of LAYERS: {unplaced}"


def test_every_folder_of_the_package_is_a_package() -> None:
    """A folder without `__init__.py` would be left out of the wheel (`packages.find`)."""
    folders = {p.parent for package in PACKAGES for p in package.rglob("*.py")}
    assert sorted(str(f) for f in folders if not (f / "__init__.py").exists()) == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of `graph` with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_import_cycle() -> None:
    assert _cycles(_graph()) == [], "modules importing each other, round a circle"


def test_no_import_cycle_in_the_shell_even_for_types() -> None:
    """`graph/` reads top-down: its modules import no circle, `if TYPE_CHECKING:` imports and
    imports inside functions included (issue 41)."""
    shell = {m: t for m, t in _graph(type_only=True).items() if m.startswith("langgraph_ctx.graph")}
    assert _cycles(shell) == [], "graph/ modules importing each other, round a circle"


def test_each_layer_imports_only_its_own_layer_or_those_below() -> None:
    upward = [
        f"{module} ({LAYERS[_layer(module)][0]}) imports {target} ({LAYERS[_layer(target)][0]})"
        for module, targets in sorted(_graph().items())
        for target in sorted(targets)
        if _layer(target) > _layer(module)
    ]
    assert upward == []


# --- one import path per name (issue 36) ----------------------------------------------------------

SURFACE_FROM_BELOW: dict[str, frozenset[str]] = {
    # The archive's references live in the base layer (every layer names them); the archive's
    # public surface lists them with the archive that writes them.
    "langgraph_ctx.archive": frozenset({"ArchiveRef", "RefKind", "is_archive_ref"}),
}


def _is_package(module: str) -> bool:
    return _modules()[module].name == "__init__.py"


@cache
def _defined(module: str) -> frozenset[str]:
    """The names a module's own top-level statements bind (imports left out)."""
    names: set[str] = set()

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, (ast.If, ast.Try)):
                walk(node.body)
                walk(node.orelse)
                for handler in getattr(node, "handlers", []):
                    walk(handler.body)

    walk(_tree(module).body)
    return frozenset(names)


@cache
def _all(module: str) -> tuple[str, ...]:
    for node in _tree(module).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [
            "__all__"
        ]:
            return tuple(ast.literal_eval(e) for e in node.value.elts)  # type: ignore[attr-defined]
    return ()


def _is_all(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [
        "__all__"
    ]


def test_no_module_only_re_exports() -> None:
    """A module other than a package's `__init__` holds code: not only imports and `__all__`."""
    bare = []
    for module in _modules():
        if _is_package(module):
            continue
        body = _tree(module).body
        if ast.get_docstring(_tree(module)) is not None:
            body = body[1:]
        if all(isinstance(n, (ast.Import, ast.ImportFrom)) or _is_all(n) for n in body):
            bare.append(module)
    assert bare == [], f"modules that only re-export other modules' names: {bare}"


def test_a_module_lists_only_the_names_it_defines() -> None:
    """`__all__` of a module names what it defines, and no import is marked as a re-export
    (`from x import y as y`): a name is imported from the module that defines it."""
    listed = {
        module: sorted(set(_all(module)) - _defined(module))
        for module in _modules()
        if not _is_package(module)
    }
    assert {m: names for m, names in listed.items() if names} == {}
    marked = [
        f"{module}:{node.lineno}: {alias.name} as {alias.asname}"
        for module in _modules()
        for node in _import_nodes(_tree(module))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    ]
    assert marked == [], f"imports marked as re-exports: {marked}"


def test_a_package_gathers_names_from_the_modules_that_define_them() -> None:
    """A subpackage's `__init__` lists the names of its own modules, each imported from the
    module that defines it; the package's `__init__` (the public API) gathers from anywhere
    in the package, from the defining module or from a subpackage that lists the name."""
    wrong = []
    for package in (m for m in _modules() if _is_package(m)):
        origin: dict[str, str] = {}
        for node in _tree(package).body:
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    origin[alias.asname or alias.name] = node.module
        for name in _all(package):
            if name in _defined(package):
                continue
            source = origin.get(name, "?")
            if package in TOP_NAMES:
                ok = source in _modules() and (
                    name in _defined(source) or (_is_package(source) and name in _all(source))
                )
            else:
                inside = source.startswith(package + ".") or name in SURFACE_FROM_BELOW.get(
                    package, frozenset()
                )
                ok = inside and source in _modules() and name in _defined(source)
            if not ok:
                wrong.append(f"{package}.{name} (imported from {source})")
    assert wrong == []


def test_the_benchmarks_import_nothing_from_the_command_line() -> None:
    """The benchmarks sit beside the package's top layer, not above it: what they measure of
    the command line they run as a command, so the two never share a copy of library logic."""
    benchmarks = PACKAGE.parent / "benchmarks"
    wrong = []
    for path in sorted(benchmarks.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            wrong += [f"{path.name}: {n}" for n in names if n.startswith("langgraph_ctx_tools.cli")]
    assert wrong == []


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring nodes of `tree` (module, class, function): prose, not code."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        value = first.value if isinstance(first, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            found.add(id(value))
    return found


def test_the_runtime_imports_nothing_of_the_tools() -> None:
    """No module of `langgraph_ctx` imports `langgraph_ctx_tools`: not at the top, not inside a
    function, not under `if TYPE_CHECKING:`, not by a module name in a string (`import_module`).
    A deployment installs the runtime alone (tests/integration/test_runtime_alone.py runs an
    agent so)."""
    runtime = [m for m in _modules() if m.split(".")[0] == "langgraph_ctx"]
    assert "langgraph_ctx.graph.middleware" in runtime  # the probe sees the runtime
    wrong = [
        f"{module} imports {target}"
        for module in runtime
        for target in sorted(_imports(module, type_only=True))
        if target.split(".")[0] != "langgraph_ctx"
    ]
    for module in runtime:
        tree = _tree(module)
        prose = _docstrings(tree)
        wrong += [
            f"{module}:{node.lineno} names {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in prose
            and "langgraph_ctx_tools" in node.value
        ]
    assert wrong == []
