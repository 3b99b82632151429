"""The package's layers: the folder tree is the architecture diagram (issue 25).

Every module under `langgraph_ctx/` is parsed with `ast`. Its imports of the package, imports
inside functions included and `if TYPE_CHECKING:` blocks left out, must go to its own layer or
to a layer below it (`LAYERS`, bottom to top), never round in a circle, and never to an old
path kept only for compatibility (`SHIMS`: thin re-export modules, left out of the graph). No
module runs over `MAX_LINES` lines unless its docstring says why it is an exception.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "langgraph_ctx"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # (layer, module prefixes), bottom to top: a module imports only from its layer or below.
    (
        "base",
        (
            "langgraph_ctx.errors",
            "langgraph_ctx.checks",
            "langgraph_ctx._effects",
            "langgraph_ctx._ids",
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
    ("cli", ("langgraph_ctx.cli",)),
)

SHIMS = frozenset(
    # Old module paths that README, docs, notebooks and tests import; each re-exports the names
    # that now live in the layers above and holds no code of its own.
    {
        "langgraph_ctx._assembly",
        "langgraph_ctx._backends",
        "langgraph_ctx._calibration",
        "langgraph_ctx._dumps",
        "langgraph_ctx._encodings",
        "langgraph_ctx._guard",
        "langgraph_ctx._media",
        "langgraph_ctx._render",
        "langgraph_ctx._summary_text",
        "langgraph_ctx.ahead",
        "langgraph_ctx.client",
        "langgraph_ctx.excerpt",
        "langgraph_ctx.extract",
        "langgraph_ctx.history",
        "langgraph_ctx.memory",
        "langgraph_ctx.middleware",
        "langgraph_ctx.provider_count",
        "langgraph_ctx.rebuild",
        "langgraph_ctx.recall",
        "langgraph_ctx.report",
        "langgraph_ctx.state",
        "langgraph_ctx.summarize",
        "langgraph_ctx.view",
    }
)

MAX_LINES = 450
EXCEPTION = re.compile(r"exception[^.]*\b450\b|\b450\b[^.]*exception", re.IGNORECASE)
"""How a docstring states that its module is an exception to the size limit, and why."""


def _name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    return {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@cache
def _tree(module: str) -> ast.Module:
    return ast.parse(_modules()[module].read_text(encoding="utf-8"))


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under `node`, functions included, `if TYPE_CHECKING:` left out."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield from _import_nodes(ast.Module(body=[other], type_ignores=[]))
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        yield from _import_nodes(child)


def _imports(module: str) -> set[str]:
    """The package modules `module` imports (a name imported from a package that is a module
    of it counts as that module)."""
    modules = _modules()
    is_package = modules[module].name == "__init__.py"
    found: set[str] = set()
    for node in _import_nodes(_tree(module)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "langgraph_ctx")
            continue
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source = node.module or ""
        if source.split(".")[0] != "langgraph_ctx":
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
                prefix != "langgraph_ctx" and module.startswith(prefix + ".")
            )
            if matches and len(prefix) > length:
                best, length = index, len(prefix)
    return best


def _graph() -> dict[str, set[str]]:
    return {m: _imports(m) for m in _modules() if m not in SHIMS}


def test_every_shim_listed_exists_and_every_other_module_has_a_layer() -> None:
    assert not SHIMS - set(_modules()), sorted(SHIMS - set(_modules()))
    unplaced = [m for m in _modules() if m not in SHIMS and _layer(m) < 0]
    assert unplaced == [], f"modules in no layer of LAYERS: {unplaced}"


def test_every_folder_of_the_package_is_a_package() -> None:
    """A folder without `__init__.py` would be left out of the wheel (`packages.find`)."""
    folders = {p.parent for p in PACKAGE.rglob("*.py")}
    assert sorted(str(f) for f in folders if not (f / "__init__.py").exists()) == []


def test_shims_only_re_export() -> None:
    """An old path holds no code: a docstring saying where the code lives, imports, `__all__`."""
    for shim in sorted(SHIMS):
        tree = _tree(shim)
        doc = ast.get_docstring(tree) or ""
        assert "langgraph_ctx." in doc, f"{shim}: the docstring should say where the code lives"
        for node in tree.body[1:]:
            is_all = isinstance(node, ast.Assign) and [
                getattr(t, "id", None) for t in node.targets
            ] == ["__all__"]
            assert isinstance(node, (ast.ImportFrom, ast.Import)) or is_all, (
                f"{shim}:{node.lineno}: a re-export module holds only imports and __all__"
            )


def test_the_package_imports_no_old_path() -> None:
    """Code in the package imports the new locations; the old paths serve outside code."""
    users = {m: sorted(_imports(m) & SHIMS) for m in _graph()}
    assert {m: s for m, s in users.items() if s} == {}


def test_no_import_cycle() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
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
    assert cycles == [], f"modules importing each other, round a circle: {cycles}"


def test_each_layer_imports_only_its_own_layer_or_those_below() -> None:
    upward = [
        f"{module} ({LAYERS[_layer(module)][0]}) imports {target} ({LAYERS[_layer(target)][0]})"
        for module, targets in sorted(_graph().items())
        for target in sorted(targets)
        if target not in SHIMS and _layer(target) > _layer(module)
    ]
    assert upward == []


def test_no_module_over_the_size_limit_without_a_stated_exception() -> None:
    oversize = []
    for module, path in _modules().items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        doc = ast.get_docstring(_tree(module)) or ""
        if lines > MAX_LINES and not EXCEPTION.search(doc):
            oversize.append(f"{module}: {lines} lines")
    assert oversize == []
