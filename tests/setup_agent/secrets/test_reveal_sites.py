"""A secret stays a masked ``SecretValue`` until the one place that starts a server: every place in
the core and the faces that reads one in clear (``.reveal``) is named here, with why it must.

The spawn path (a tool call → the installer and preparer → the probe or a live connection or
``mcp-setup run`` → the process) reveals nothing until the launch (``launch/start.py``); a new
reveal anywhere fails this test until it is named below, and a named one that went fails it too,
so the list stays the truth.
"""

from __future__ import annotations

import ast
import gc

from tests.helpers.paths import REPO

ROOT = REPO

#: ``module:qualified function`` → why it reads a secret in clear.
ALLOWED = {
    # The launch: the only reveal on the way to a process or a remote.
    "setup_agent.launch.start:_filled": "the launch fills a server's templates as it starts it or reaches it",
    # The user's own storage: a value is encrypted (or checked, then encrypted) into the store.
    "setup_agent.secrets.vault:Vault.encrypt": "encrypting a value into the store",
    "setup_agent.store.servers:_spec_json": "checking that a launch spec stored in clear holds no secret value",
    "setup_agent.store.values:Values.set_member_value": "a member's value, checked then encrypted",
    "setup_agent.store.shared_state:SharedRefs.put": "a team's ref, encrypted into its database",
    "setup_agent.store.shared_state:SharedRefs._fill": "a team's ref answered, encrypted into its database",
    "setup_agent.setup.shared_prompts:ReplicaPrompts.answer": "a prompt of another replica answered into the database",
    "setup_agent.store.audit_key:read_chain_key": "the audit chain's key, decrypted to make and check its links",
    "setup_agent.store.shared_sign_ins:SharedSignIns.claim": "a team's sign-in exchange, decrypted to finish it",
    "setup_agent.store.shared_sign_ins:SharedSignIns.take": "a team's sign-in outcome, decrypted for its replica",
    # The redactor must know a value's text to hide it.
    "setup_agent.secrets.redact:_known": "a value taught to the redactor",
    "setup_agent.secrets.refs:SecretRefStore.live_values": "the live refs' values, the redactor's source",
    "setup_agent.gateway.connections:ConnectionManager.learn_stored_secrets": "stored secrets, for the redactor",
    "setup_agent.gateway.members:MemberSessions.learn_secrets": "members' own values, for the redactor",
    # A remote's sign-in: its tokens sign the remote's requests (its launch) or are revoked.
    "setup_agent.oauth.sign_ins:SignIns.auth_for_ref": "a sign-in ref's tokens, to sign a test's requests",
    "setup_agent.oauth.sign_ins:SignIns.auth_for_installed": "a stored sign-in's tokens, to sign its requests",
    "setup_agent.setup.service:SetupService._revoke_sign_in": "a removed server's tokens, revoked at their issuer",
    # Settings that are not secret (the store keeps every value encrypted): the person's own view
    # and file, and an update installing them again as they were given.
    "setup_agent.setup.updates:update_server": "non-secret settings, given to the new version as before",
    "app.web.server_details:_details": "a non-secret setting shown (redacted) on the person's page",
    "app.cli.lock_export:entry_for": "non-secret settings written to the person's lock file",
}


def _reveal_sites() -> dict[str, list[int]]:
    # Without the collector meanwhile: a finalizer it runs inside an AST's construction (a
    # subprocess transport of an earlier test, its loop closed) makes CPython 3.11.7 raise
    # "AST constructor recursion depth mismatch" (python/cpython#106905).
    gc.collect()
    gc.disable()
    try:
        return _scan()
    finally:
        gc.enable()


def _scan() -> dict[str, list[int]]:
    sites: dict[str, list[int]] = {}
    for top in ("setup_agent", "app"):
        for path in sorted((ROOT / top).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)

            def visit(node: ast.AST, scope: list[str], module: str = module) -> None:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        visit(child, [*scope, child.name])
                        continue
                    if isinstance(child, ast.Attribute) and child.attr == "reveal":  # called or passed on
                        sites.setdefault(f"{module}:{'.'.join(scope) or '<module>'}", []).append(child.lineno)
                    visit(child, scope)

            visit(ast.parse(path.read_text(encoding="utf-8")), [])
    return sites


def test_a_secret_is_read_in_clear_only_where_this_list_says_why() -> None:
    found = _reveal_sites()
    unnamed = {site: lines for site, lines in found.items() if site not in ALLOWED}
    assert unnamed == {}, "a reveal outside the launch and the named places"
    assert set(ALLOWED) - set(found) == set(), "a named place no longer reveals: take it off the list"


#: The modules a tool's arguments pass through to a start (besides ``service.py``, whose one reveal
#: is the revocation of a removed server's sign-in, named above).
SPAWN_PATH = (
    "setup_agent.setup.tool_requests",
    "setup_agent.setup.installer",
    "setup_agent.setup.preparation",
    "setup_agent.setup.probe",
    "setup_agent.setup.adoption",
    "setup_agent.setup.rotation",
    "setup_agent.gateway.live",
    "app.cli.clients",
)


def test_on_the_way_from_a_tool_call_to_a_process_only_the_launch_reveals() -> None:
    on_path = {
        site for site in _reveal_sites() if site.split(":")[0] in SPAWN_PATH or site.startswith("setup_agent.launch.")
    }
    assert on_path == {"setup_agent.launch.start:_filled"}
