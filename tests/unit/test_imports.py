import ast
import importlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import langgraph_ctx
from tests.unit.test_layers import TOP_NAMES, _all, _defined, _is_package, _modules

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = [
    "ApproximateCounter",
    "Archive",
    "ArchiveBackend",
    "ArchiveError",
    "BuildResult",
    "Compaction",
    "ConfigError",
    "ContextBudget",
    "ContextCostReport",
    "ContextManager",
    "ContextMemory",
    "ContextReactState",
    "ContextState",
    "ContextWindowExceededError",
    "Decision",
    "DirectoryBackend",
    "DropMemory",
    "DynamicSummarization",
    "EntityExtraction",
    "EntityExtractor",
    "LangGraphCtxError",
    "Plan",
    "PromptView",
    "PruneToolOutputs",
    "ScriptedChatModel",
    "SlidingWindow",
    "Strategy",
    "Summarizer",
    "TiktokenCounter",
    "TokenCounter",
    "count_tokens",
    "counter_for_model",
    "default_strategies",
    "register_strategy",
    "repair_messages",
    "strategies_from_config",
    "validate_messages",
]


def test_all_is_sorted_and_pinned() -> None:
    assert langgraph_ctx.__all__ == sorted(langgraph_ctx.__all__)
    assert langgraph_ctx.__all__ == EXPECTED


def test_every_public_name_has_a_docstring() -> None:
    missing = [
        name
        for name in langgraph_ctx.__all__
        if not (getattr(getattr(langgraph_ctx, name), "__doc__", None) or "").strip()
    ]
    # Plan and TokenCounter are type aliases; their documentation lives next to them.
    assert missing in ([], ["Plan", "TokenCounter"])


def test_the_library_loads_no_tool_or_postgres_dependency() -> None:
    # A fresh interpreter: this test process has long imported everything. httpx (under
    # langchain) loads rich for its own command line when click is installed (the test extra's
    # langgraph-cli brings it): the probe counts only what `import langgraph_ctx` adds.
    code = (
        "import sys, httpx, langchain_core, langchain, langgraph; before = set(sys.modules); "
        "import langgraph_ctx; print('\\n'.join(set(sys.modules) - before))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = done.stdout.split()
    assert "langgraph_ctx.tokens" in loaded  # the probe sees the library's own modules
    heavy = ("rich", "psycopg", "psycopg_pool", "langgraph.checkpoint.postgres", "matplotlib")
    heavy += ("langgraph_ctx_tools",)
    assert [n for n in loaded if n in heavy or n.startswith(tuple(f"{h}." for h in heavy))] == []


# --- one import path per name (issue 36) ----------------------------------------------------------

CODE_BLOCK_RE = re.compile(r"```(?:python|py)\n(.*?)```", flags=re.S)


def _sources() -> list[tuple[str, str]]:
    """(label, Python source) of every place that imports the package: its modules, the tests,
    the benchmarks, the notebooks' code cells and the code blocks of the README and the docs."""
    found = [
        (path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"))
        for folder in ("langgraph_ctx", "tools", "tests", "benchmarks", "notebooks")
        for path in sorted((ROOT / folder).rglob("*.py"))
    ]
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        found += [
            (f"{path.name} cell {n}", "".join(cell["source"]))
            for n, cell in enumerate(cells)
            if cell["cell_type"] == "code"
        ]
    for path in [
        ROOT / "README.md",
        ROOT / "tools" / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
    ]:
        text = path.read_text(encoding="utf-8")
        found += [
            (f"{path.relative_to(ROOT).as_posix()} block {n}", block)
            for n, block in enumerate(CODE_BLOCK_RE.findall(text))
        ]
    return found


def _misplaced(label: str, source: str) -> list[str]:
    """The imports of `source` that take a package name from a module that does not define
    it (a package's `__init__` may give the names of its `__all__`)."""
    modules = _modules()
    wrong = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            wrong += [
                f"{label}:{node.lineno}: no module {a.name}"
                for a in node.names
                if a.name.split(".")[0] in TOP_NAMES and a.name not in modules
            ]
        if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
            continue
        if node.module.split(".")[0] not in TOP_NAMES:
            continue
        if node.module not in modules:
            wrong.append(f"{label}:{node.lineno}: no module {node.module}")
            continue
        for alias in node.names:
            name = alias.name
            if f"{node.module}.{name}" in modules or name in _defined(node.module):
                continue
            if _is_package(node.module) and name in _all(node.module):
                continue
            wrong.append(f"{label}:{node.lineno}: {name} does not live in {node.module}")
    return wrong


def test_every_import_takes_a_name_from_where_it_lives() -> None:
    wrong = [line for label, source in _sources() for line in _misplaced(label, source)]
    assert wrong == []


def test_the_changelog_says_where_the_names_of_each_removed_module_live() -> None:
    """Each module the changelog lists as removed is gone, and each of its names is importable
    from the path the changelog gives."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    removed = text.split("\n### Removed\n", 1)[1].split("\n### ", 1)[0]
    entries = re.findall(r"^- `(langgraph_ctx[\w.]*)`: (.+)$", removed, flags=re.M)
    assert len(entries) >= 23
    wrong = []
    for old, moves in entries:
        try:
            exists = importlib.util.find_spec(old) is not None
        except ModuleNotFoundError:  # its parent package is gone too
            exists = False
        if exists:
            wrong.append(f"{old} still exists")
        for move in moves.split("; "):
            names, new = move.split(" -> ")
            module = importlib.import_module(new.strip("`"))
            wrong += [
                f"{old}.{name} is not in {module.__name__}"
                for name in re.findall(r"`(\w+)`", names)
                if not hasattr(module, name)
            ]
    assert wrong == []


# --- no private name crosses a module boundary (issue 54) -----------------------------------------


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_imports_another_modules_private_name() -> None:
    """A module of the package takes from another only the names that module offers: none
    starting with `_`, at the top or inside a function, by `from … import` or by attribute
    of an imported module."""
    modules = _modules()
    wrong = []
    paths = [*(ROOT / "langgraph_ctx").rglob("*.py"), *(ROOT / "tools").rglob("*.py")]
    for path in sorted(paths):
        label = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases: dict[str, str] = {}  # local name -> module of the package it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in TOP_NAMES and a.asname:
                        aliases[a.asname] = a.name
            if not (isinstance(node, ast.ImportFrom) and node.module):
                continue
            if node.module.split(".")[0] not in TOP_NAMES or node.level:
                continue
            for a in node.names:
                if _private(a.name):
                    wrong.append(f"{label}:{node.lineno}: {node.module}.{a.name}")
                elif f"{node.module}.{a.name}" in modules:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _private(node.attr)
            ):
                wrong.append(f"{label}:{node.lineno}: {aliases[node.value.id]}.{node.attr}")
    assert wrong == []
