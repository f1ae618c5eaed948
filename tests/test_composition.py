"""Objects are composed, never finished after they are built.

A collaborator is a constructor argument: no product code assigns an attribute onto an object it
did not just create as a record. The scan reads every module of the product and flags
``x.attr = …`` (also augmented, annotated, inside a tuple) and ``setattr(x, …)`` unless:

- ``x`` is ``self`` or ``cls`` (an object keeps its own state), or
- ``x`` is known to be a record: a dataclass, a pydantic model, a SQLAlchemy row, a named tuple or
  an exception of the product, known from a parameter's annotation, the call that made it, the
  ``except`` that caught it, or the line in the class that set ``self.x``. Records are data their
  owner updates; runtime objects (managers, brokers, the gateway) are not.

What is left must be in :data:`ALLOWED`, each with why.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("app", "setup_agent", "registry_clients")

#: ``(module path, the assigned expression)``: libraries whose documented way is an attribute.
ALLOWED = {
    # argparse: the help text and a flag the command fills in are the parser's documented attributes.
    ("app/cli/main.py", "sub.help"): "argparse's sub-command help, set while grouping commands",
    ("app/cli/main.py", "parser.epilog"): "argparse's epilog, filled in when help is printed",
    ("app/cli/servers.py", "args.json"): "an argparse Namespace the command reads",
    ("app/cli/main.py", "group._group_actions"): "argparse lists a group's actions only through this list",
    # ctypes: a Structure's fields are set one by one before it is passed to the kernel.
    ("setup_agent/launch/landlock.py", "attr.handled_access_net"): "a ctypes Structure filled for landlock(2)",
    ("setup_agent/launch/landlock.py", "attr.scoped"): "a ctypes Structure filled for landlock(2)",
    # The SDK's dispatcher reads a server's answer strictly; lenient.py wraps that one method.
    ("setup_agent/launch/lenient.py", "dispatcher.send_raw_request"): "the SDK offers no hook for lenient reads",
    ("setup_agent/launch/lenient.py", "dispatcher._mcp_setup_lenient"): "marks the SDK dispatcher wrapped once",
    # The page's link keys are made before the face has its runtime (the secret app needs them
    # at once); a team's shared digests join them when the runtime is built, at startup.
    ("app/web/app.py", "self.capabilities.shared"): "the web face's own keys, joined by its runtime's at startup",
    # A page server started on its own hides the keys it issues from the log lines of this process.
    ("app/pages/server.py", "self.capabilities.on_issue"): "the page server's own keys, hidden in logs as it starts",
    # uvicorn's Server is stopped by its documented flags.
    ("app/pages/server.py", "server.should_exit"): "uvicorn's documented way to stop a Server",
    ("app/pages/server.py", "server.force_exit"): "uvicorn's documented way to stop a Server now",
    # Starlette keeps an application's own objects on ``app.state`` (its documented place).
    ("app/web/app.py", "app.state.face"): "Starlette's app.state, its documented place for app objects",
    # logging.Filter rewrites the record it is handed: the documented way to redact a log line.
    ("setup_agent/secrets/redact.py", "record.msg"): "a logging.Filter rewrites its LogRecord",
    ("setup_agent/secrets/redact.py", "record.args"): "a logging.Filter rewrites its LogRecord",
    ("setup_agent/secrets/redact.py", "record.exc_text"): "a logging.Filter rewrites its LogRecord",
    ("setup_agent/secrets/redact.py", "record.exc_info"): "a logging.Filter rewrites its LogRecord",
    ("setup_agent/secrets/redact.py", "record.stack_info"): "a logging.Filter rewrites its LogRecord",
    # psycopg's raw DBAPI connection: autocommit is its documented switch (LISTEN needs it).
    ("setup_agent/store/change_feed.py", "raw.autocommit"): "psycopg's documented autocommit switch",
}

RECORD_BASES = {
    "BaseModel",
    "Base",
    "NamedTuple",
    "TypedDict",
    "Exception",
    "LookupError",
    "ValueError",
    "RuntimeError",
}


def _trees() -> dict[str, ast.Module]:
    return {
        str(p.relative_to(ROOT)): ast.parse(p.read_text(), filename=str(p))
        for top in PRODUCT
        for p in sorted((ROOT / top).rglob("*.py"))
    }


TREES = _trees()


def _name(node: ast.expr | None) -> str | None:
    """The class a type expression or a call names (``a.B`` → ``B``, ``B | None`` → ``B``)."""
    if isinstance(node, ast.Call):
        return _name(node.func)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _name(node.value)
    if isinstance(node, ast.BinOp):  # X | None
        return _name(node.left) if not (isinstance(node.left, ast.Constant) and node.left.value is None) else None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return _name(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return None
    return None


def _classes() -> set[str]:
    return {node.name for tree in TREES.values() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}


CLASSES = _classes()


def _records() -> set[str]:
    """Class names of the product that are records (see the module doc)."""
    bases: dict[str, set[str]] = {}
    records: set[str] = set()
    for tree in TREES.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {n for b in node.bases if (n := _name(b))}
                if any("dataclass" in ast.unparse(d) for d in node.decorator_list):
                    records.add(node.name)
    grew = True
    while grew:  # a subclass of a record (or of an exception) is one
        grew = False
        for name, parents in bases.items():
            if name not in records and parents & (records | RECORD_BASES | {n for n in bases if n.endswith("Error")}):
                records.add(name)
                grew = True
    return records


RECORDS = _records()


def _attributes() -> tuple[set[str], set[str]]:
    """``(fields of records, attributes of runtime objects)``: what each kind of class declares
    (class annotations) or sets on ``self``."""
    fields: set[str] = set()
    runtime: set[str] = set()
    for tree in TREES.values():
        for cls in ast.walk(tree):
            if not isinstance(cls, ast.ClassDef):
                continue
            names = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
            for node in ast.walk(cls):
                for target in _targets(node):
                    if isinstance(target, ast.Attribute) and _is_self(target.value):
                        names.add(target.attr)
            (fields if cls.name in RECORDS else runtime).update(names)
    return fields, runtime - fields


def _local_types(func: ast.AST) -> dict[str, str]:
    """What each local name of ``func`` is known to be: annotations, constructors, ``except``."""
    known: dict[str, str] = {}
    if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
        for arg in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]:
            if arg.annotation is not None and (n := _name(arg.annotation)):
                known[arg.arg] = n
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            for target in node.targets:
                if isinstance(target, ast.Name) and (n := _name(node.value)):
                    known.setdefault(target.id, n)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and (n := _name(node.annotation)):
            known[node.target.id] = n
        elif isinstance(node, ast.ExceptHandler) and node.name and (n := _name(node.type)):
            known[node.name] = n
        elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            if n := _name(node.context_expr):
                known.setdefault(node.optional_vars.id, n)
    return known


def _own_types(cls: ast.ClassDef) -> dict[str, str]:
    """What each ``self.x`` of ``cls`` is known to be (class annotations, ``self.x = X(…)``)."""
    known: dict[str, str] = {}
    for node in ast.walk(cls):
        if isinstance(node, ast.AnnAssign):
            target = node.target
            if isinstance(target, ast.Name) or (isinstance(target, ast.Attribute) and _is_self(target.value)):
                if n := _name(node.annotation):
                    known[target.id if isinstance(target, ast.Name) else target.attr] = n
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and _is_self(target.value) and (n := _name(node.value)):
                    known.setdefault(target.attr, n)
    return known


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _targets(node: ast.AST) -> Iterator[ast.expr]:
    if isinstance(node, ast.Assign):
        pending = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        pending = [node.target]
    else:
        return
    while pending:
        target = pending.pop()
        if isinstance(target, ast.Tuple | ast.List):
            pending += target.elts
        else:
            yield target


def _violations() -> list[str]:
    found: list[str] = []

    fields, _runtime = _attributes()

    def record(base: ast.expr, locals_: dict[str, str], own: dict[str, str], attr: str | None) -> bool:
        known = None
        if isinstance(base, ast.Name):
            known = locals_.get(base.id)
        elif isinstance(base, ast.Attribute) and _is_self(base.value):
            known = own.get(base.attr)
        if known is not None and known in CLASSES:
            return known in RECORDS
        # Of a type not known here: a record's field, set by code that reads that record.
        return attr is not None and attr in fields

    def visit(node: ast.AST, path: str, func: ast.AST | None, own: dict[str, str], locals_: dict[str, str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, path, None, _own_types(child), {})
                continue
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, path, child, own, {**locals_, **_local_types(child)})
                continue
            for target in _targets(child):
                if isinstance(target, ast.Attribute) and not _is_self(target.value):
                    if not record(target.value, locals_, own, target.attr):
                        found.append(f"{path}:{child.lineno}: {ast.unparse(target)}")
            if isinstance(child, ast.Call) and _name(child.func) == "setattr" and child.args:
                if not _is_self(child.args[0]) and not record(child.args[0], locals_, own, None):
                    found.append(f"{path}:{child.lineno}: setattr({ast.unparse(child.args[0])}, …)")
            visit(child, path, func, own, locals_)

    for path, tree in TREES.items():
        visit(tree, path, None, {}, {})
    return [v for v in found if (v.split(":")[0], v.split(": ", 1)[1]) not in ALLOWED]


def test_no_product_code_assigns_an_attribute_onto_an_object_it_did_not_build_as_a_record() -> None:
    assert _violations() == []


def test_each_allowed_assignment_is_still_in_the_code() -> None:
    """An allowance whose line is gone goes too: the list stays short and true."""
    seen = set()
    for path, tree in TREES.items():
        for node in ast.walk(tree):
            for target in _targets(node):
                seen.add((path, ast.unparse(target)))
    assert sorted(set(ALLOWED) - seen) == []
