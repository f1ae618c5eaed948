"""The tree keeps the architecture of docs/ARCHITECTURE.md: packages by concern, arrows one way.

Every import of the product's code is read (module level, inside functions and under
``TYPE_CHECKING`` alike), a package's lazy re-export is followed to the module that defines the
name, and the rules are checked on the resulting graph of files.
"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("app", "setup_agent", "registry_clients")

#: Lower layers first; a module may import only from its own package or one listed before it.
ORDER = [
    "registry_clients",
    "setup_agent.errors",
    "setup_agent.translation",
    "setup_agent.lazy",
    "setup_agent.package_data",
    "setup_agent.principals",
    "setup_agent.pulls",
    "setup_agent.secrets",
    "setup_agent.store",
    "setup_agent.launch",
    "setup_agent.gateway",
    "setup_agent.oauth",
    "setup_agent.setup",
    "setup_agent.agent",
    "setup_agent",  # the package's own __init__ re-exports from every package of the core
    "app.settings",
    "app.data_key",
    "app.runtime",
    "app.pages",
    "app.mcp",
    "app.clients",
    "app.web",
    "app.cli",
    "app",
]
SUBPACKAGES = [p for p in ORDER if (ROOT / p.replace(".", "/") / "__init__.py").is_file() and p.count(".") == 1]
#: Past this many lines a module is worth a look (one idea, or two?): a warning, never a failure.
#: Modules are split by idea, never to meet a count.
LONG_MODULE_LINES = 600


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for top in PRODUCT for p in sorted((ROOT / top).rglob("*.py"))}


MODULES = _modules()
#: Every module's syntax tree, parsed once while the test module is imported (at collection, on the
#: main thread, before any test starts a thread). CPython 3.11's ``ast`` keeps one recursion counter
#: for the whole interpreter (python/cpython#106905): another test's thread parsing at the same time
#: (3.11's traceback formatting calls ``ast.parse``) made a parse here fail with "AST constructor
#: recursion depth mismatch".
TREES = {m: ast.parse(p.read_text(), filename=str(p)) for m, p in MODULES.items()}


def _lazy_map(package: str) -> dict[str, str]:
    """``name -> defining module`` from a package's ``lazy_exports(__name__, {...})``."""
    for node in ast.walk(TREES[package]):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_exports":
            where = ast.literal_eval(node.args[1])
            return {name: f"{package}.{module}" for name, module in where.items()}
    return {}


def _layer(module: str) -> str:
    return max((p for p in ORDER if module == p or module.startswith(p + ".")), key=len)


def _imports(module: str) -> list[tuple[int, str, str | None, int]]:
    """``(line, target module, imported name or None, level)`` for every import in ``module``."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[int, str, str | None, int]] = []
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None, 0) for a in node.names if a.name.split(".")[0] in PRODUCT]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] in PRODUCT:
                out += [(node.lineno, target, a.name, node.level) for a in node.names]
    return out


def _edges() -> dict[str, set[str]]:
    """File-level import graph: a package's re-exported name counts as an import of its module."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for _, target, name, _ in _imports(module):
            if name is not None and f"{target}.{name}" in MODULES:
                dest = f"{target}.{name}"
            elif name is not None and MODULES.get(target, Path()).name == "__init__.py":
                dest = _lazy_map(target).get(name, target)
            else:
                dest = target
            if dest != module and dest in MODULES:
                graph[module].add(dest)
    return graph


def test_the_top_level_is_the_fixed_layout_with_ui_and_agents_beside_the_packages() -> None:
    for entry in ("app", "setup_agent", "registry_clients", "ui", "agents", "tests", "pyproject.toml"):
        assert (ROOT / entry).exists(), entry
    assert (ROOT / "ui" / "index.html").is_file() and list((ROOT / "ui" / "js").glob("*.js"))
    assert (ROOT / "agents" / "mcp_setup.toml").is_file()
    assert not (ROOT / "app" / "ui").exists() and not (ROOT / "setup_agent" / "agent_defs").exists()


def test_no_two_files_import_each_other_nor_any_longer_circle() -> None:
    graph = _edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert circles == []


def test_arrows_point_down_between_layers_and_between_the_core_packages() -> None:
    rank = {layer: i for i, layer in enumerate(ORDER)}
    upward = []
    for module, targets in _edges().items():
        here = _layer(module)
        for target in targets:
            there = _layer(target)
            if there != here and rank[there] > rank[here]:
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_outside_a_package_code_imports_only_the_names_its_init_declares() -> None:
    bad = []
    for module, path in MODULES.items():
        for line, target, name, _level in _imports(module):
            package = next((p for p in SUBPACKAGES if target == p or target.startswith(p + ".")), None)
            if package is None or module == package or module.startswith(package + "."):
                continue
            public = _lazy_map(package)
            if target != package or name not in public:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name} from {target}")
    assert bad == []


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_each_package_init_says_what_it_owns_and_declares_its_public_names(package: str) -> None:
    import importlib

    doc = ast.get_docstring(TREES[package]) or ""
    assert len(doc.split()) > 15 and ("import" in doc.lower()), package
    mod = importlib.import_module(package)
    assert sorted(mod.__all__) == sorted(_lazy_map(package))
    for name in mod.__all__:
        assert getattr(mod, name) is not None, f"{package}.{name}"


def test_a_long_module_is_named_in_a_warning_for_a_reader_to_look_at() -> None:
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > LONG_MODULE_LINES}
    for module, lines in sorted(long.items()):
        warnings.warn(f"{module} has {lines} lines: does it still hold one idea?", stacklevel=1)


def test_no_line_is_kept_from_the_formatter_to_pack_it() -> None:
    marker = "fmt: " + "skip"  # spelled apart so this file does not match itself
    packed = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in [*MODULES.values(), *sorted((ROOT / "tests").rglob("*.py"))]
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if marker in line
    ]
    assert packed == []


def _sibling_bases(module: str, tree: ast.Module | None = None) -> dict[str, list[str]]:
    """``{class name: [bases defined in other modules of the same package]}`` for ``module``'s
    classes (``tree``: its syntax tree, when not the file's)."""
    tree = tree or TREES[module]
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    origin: dict[str, tuple[str, str]] = {}  # a name bound by an import -> (defining module, its name)
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            parts = package.split(".")
            target = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        for alias in node.names:
            if f"{target}.{alias.name}" in MODULES:
                continue  # a module, not a class
            defined = _lazy_map(target).get(alias.name, target) if target in MODULES else target
            origin[alias.asname or alias.name] = (defined, alias.name)
    out: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = [origin[b.id] for b in node.bases if isinstance(b, ast.Name) and b.id in origin]
            siblings = [f"{m}.{name}" for m, name in bases if m != module and m.rpartition(".")[0] == package]
            if len(siblings) >= 2:
                out[node.name] = siblings
    return out


def test_no_class_is_assembled_from_classes_of_its_sibling_modules() -> None:
    """A class whose methods come from two or more files of its own package (mixins sharing its
    private helpers) is one idea spread over several files: compose collaborators instead."""
    mixed = {f"{m}.{c}": bases for m in MODULES for c, bases in _sibling_bases(m).items()}
    assert mixed == {}


def test_the_mixin_check_names_a_class_built_from_two_sibling_modules() -> None:
    tree = ast.parse("from .pins import ToolPins\nfrom .values import Values as V\nclass Store(ToolPins, V): ...")
    found = _sibling_bases("setup_agent.store.database", tree)
    assert found == {"Store": ["setup_agent.store.pins.ToolPins", "setup_agent.store.values.Values"]}


def test_no_file_name_repeats_its_package_name() -> None:
    repeated = [m for m in MODULES if "." in m and m.rsplit(".", 1)[1].startswith(m.rsplit(".", 2)[-2] + "_")]
    assert repeated == []


def test_the_public_names_of_setup_agent_still_resolve_from_the_package() -> None:
    import inspect

    import setup_agent

    assert {"SetupService", "Store", "TOOL_SPECS", "spawn_subagent", "SetupError"} <= set(setup_agent.__all__)
    for name in setup_agent.__all__:
        assert getattr(setup_agent, name) is not None, name
    assert inspect.iscoroutinefunction(setup_agent.spawn_subagent)
    assert {spec["name"] for spec in setup_agent.TOOL_SPECS} >= {"mcp_setup_search", "mcp_setup_install_and_connect"}


def test_the_mcp_setup_script_points_at_the_cli_entry_point() -> None:
    import tomllib

    script = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["mcp-setup"]
    module, _, attr = script.partition(":")
    assert module in MODULES and callable(getattr(__import__(module, fromlist=[attr]), attr))


# The tests mirror the source: a test file lives in the folder of the package it tests
# (tests/setup_agent/store/ for setup_agent/store/), shared code lives in tests/helpers/, and no
# test file is imported by another.
TESTS = ROOT / "tests"
#: Folders of tests that are not about one package: whole flows across processes and faces, the
#: page in a real browser, the tests' own harness (stub servers, hang guards), and the docs (the
#: README, the generated references, the architecture map).
TEST_FOLDERS_BESIDE_THE_SOURCE = ("e2e", "browser", "harness", "docs")
#: The only tests at the top of tests/: about the whole tree (its layers, and how its parts are
#: put together).
TOP_LEVEL_TESTS = ("test_layout.py", "test_composition.py")
TEST_TREES = {p: ast.parse(p.read_text(), filename=str(p)) for p in sorted(TESTS.rglob("*.py"))}


def test_each_test_file_lives_beside_the_package_it_tests() -> None:
    misplaced = []
    for path in TEST_TREES:
        if not path.name.startswith("test_"):
            continue
        folder = path.parent.relative_to(TESTS)
        if folder == Path("."):
            ok = path.name in TOP_LEVEL_TESTS
        elif folder.parts[0] in TEST_FOLDERS_BESIDE_THE_SOURCE:
            ok = True
        else:
            ok = folder.parts[0] in PRODUCT and (ROOT / folder / "__init__.py").is_file()
        if not ok:
            misplaced.append(str(path.relative_to(ROOT)))
    assert not misplaced, f"test files outside a folder that mirrors a source package: {misplaced}"


def test_every_test_folder_with_python_is_a_package() -> None:
    """pytest imports each test as ``tests.<folder>.<file>``: two files of one name in two folders stay apart."""
    folders = {p.parent for p in TEST_TREES if "fixtures" not in p.relative_to(TESTS).parts}
    assert not [str(f.relative_to(ROOT)) for f in sorted(folders) if not (f / "__init__.py").is_file()]


def test_no_module_imports_a_test_module() -> None:
    """What tests share is in tests/helpers/ (or beside the browser tests); a test module is imported by pytest only."""
    bad = []
    for path, tree in TEST_TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [f"{node.module or ''}.{a.name}" for a in node.names]
            else:
                continue
            if any(part.startswith("test_") for name in names for part in name.split(".")):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, f"imports of a test module: {bad}"
