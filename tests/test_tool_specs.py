"""The tools' input schemas and their handlers agree: every argument a handler reads (directly or
through the helpers it hands ``args`` to, in any core module, such as ``Preparer.prepare``) is declared with the tool, and
every declared argument is read. An undeclared argument is one an agent cannot know about."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from setup_agent.setup.tool_specs import TOOL_NAMES, tool_spec

CORE = Path(__file__).resolve().parent.parent / "setup_agent"
SERVICE = CORE / "setup" / "service.py"

#: Read by a shared helper but meaningless for this tool (documented here, not declared).
NOT_FOR_THIS_TOOL = {
    # authorize runs _prepare (shared with test and install) to find the remote's URL; a sign-in
    # is what produces an oauth_ref, so the tool does not take one.
    "mcp_setup_authorize": {"oauth_ref"},
}


def _is_args(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "args"


def _reads(fn: ast.AST) -> tuple[set[str], set[str]]:
    """The ``args`` keys ``fn`` reads itself, and the functions or methods it hands ``args`` to."""
    keys: set[str] = set()
    calls: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            first = node.args
            if len(first) >= 2 and _is_args(first[0]) and isinstance(first[1], ast.Constant):
                keys.add(first[1].value)  # _opt_name(args, "x"), _str_map(args, "x"), ...
            func = node.func
            if isinstance(func, ast.Attribute) and _is_args(func.value) and func.attr == "get":
                if first and isinstance(first[0], ast.Constant):
                    keys.add(first[0].value)  # args.get(name) inside req_str & co: their callers name it
            if any(_is_args(a) for a in node.args) or any(_is_args(k.value) for k in node.keywords):
                if isinstance(func, ast.Attribute):
                    calls.add(func.attr)  # self._x(args), self.preparer.prepare(args), ...
                elif isinstance(func, ast.Name):
                    calls.add(func.id)
        elif isinstance(node, ast.Subscript) and _is_args(node.value) and isinstance(node.slice, ast.Constant):
            keys.add(node.slice.value)
    return keys, calls


def _handler_reads() -> dict[str, set[str]]:
    methods: dict[str, list[ast.AST]] = {}  # every function and method of the core, by name
    for module in sorted(CORE.rglob("*.py")):
        for fn in ast.walk(ast.parse(module.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods.setdefault(fn.name, []).append(fn)
    handlers: dict[str, str] = {}
    for cls in (n for n in ast.parse(SERVICE.read_text()).body if isinstance(n, ast.ClassDef)):
        for fn in cls.body:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == "_handlers":
                table = next(n for n in ast.walk(fn) if isinstance(n, ast.Dict))
                handlers = {k.value: v.attr for k, v in zip(table.keys, table.values)}  # type: ignore[union-attr]
    assert set(handlers) == set(TOOL_NAMES)
    out: dict[str, set[str]] = {}
    for tool, method in handlers.items():
        seen: set[str] = set()
        todo = [method]
        keys: set[str] = set()
        while todo:
            name = todo.pop()
            if name in seen or name not in methods:
                continue
            seen.add(name)
            for fn in methods[name]:
                own, calls = _reads(fn)
                keys |= own
                todo.extend(calls)
        out[tool] = keys
    return out


READS = _handler_reads()


@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_every_argument_a_tool_reads_is_declared_in_its_schema_and_every_declared_one_is_read(tool: str) -> None:
    declared = set(tool_spec(tool)["inputSchema"].get("properties", {}))
    read = READS[tool] - NOT_FOR_THIS_TOOL.get(tool, set())
    assert read - declared == set(), f"{tool} reads arguments its schema does not declare"
    assert declared - read == set(), f"{tool} declares arguments its handler ignores"


def test_install_declares_the_version_to_install_with_a_description() -> None:
    version = tool_spec("mcp_setup_install_and_connect")["inputSchema"]["properties"]["version"]
    assert version["type"] == "string" and "version" in version["description"]
