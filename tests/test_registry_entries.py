"""Issue 11, one focused test per item, on the real entries that showed each problem."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.runtime import Runtime, build_runtime
from app.settings import Settings
from registry_clients.serverjson import parse_server_json
from setup_agent.errors import InvalidEntry, NoRunnablePackage
from setup_agent.launch.packages import build_spec, choose_package, package_platform, unset_keys
from setup_agent.launch.spec import fill
from setup_agent.setup.service import CallContext
from tests.conftest_registry import SAMPLE_FILES, load_fixture


def entry(name: str, version: str | None = None) -> dict[str, Any]:
    found = [
        d
        for f in SAMPLE_FILES
        for d in load_fixture(f)
        if (d.get("server") or d)["name"] == name and (version is None or (d.get("server") or d)["version"] == version)
    ]
    return found[-1]


def detail(name: str, version: str | None = None):
    return parse_server_json(entry(name, version), source="official")


def unset_spec(pkg):
    return build_spec(pkg, omit=unset_keys(pkg.required_keys, {}))


# -- 2 ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("here", "chosen"),
    [
        (("linux", "amd64"), "linux_amd64"),
        (("linux", "arm64"), "linux_arm64"),
        (("darwin", "arm64"), "darwin_arm64"),
        (("darwin", "amd64"), "darwin_amd64"),
        (("windows", "amd64"), "windows_amd64"),
    ],
)
def test_the_bundle_built_for_this_os_and_architecture_is_chosen(here, chosen) -> None:
    d = detail("io.github.cloudquery/mcp", "1.6.8")
    assert choose_package(d.packages, platform=here, which=lambda _: None).identifier.endswith(f"_{chosen}.mcpb")


def test_a_platform_without_a_build_is_told_so() -> None:
    d = detail("io.github.cloudquery/mcp", "1.6.8")
    assert package_platform(d.packages[0]) == ("darwin", "arm64")
    with pytest.raises(NoRunnablePackage, match="no build for this platform"):
        choose_package(d.packages, platform=("windows", "arm64"), which=lambda _: None)


# -- 3 (the builder's half) --------------------------------------------------------------
def test_an_http_serving_package_gets_its_command_and_a_local_url_and_a_remote_host_is_invalid() -> None:
    spec = unset_spec(next(p for p in detail("icu.steeped.registry/nodejsmcp", "1.0.3").packages))
    assert (spec.command, spec.transport, spec.url) == ("npx", "streamable-http", "http://localhost:3000/mcp")
    i18n = detail("io.github.SamYuan1990/i18n-agent-action").packages[0]
    with pytest.raises(InvalidEntry):
        build_spec(i18n)


# -- 4 ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "absent"),
    [
        ("com.knitli/codeweaver", ["--verbose", "--debug", "--project"]),
        ("io.github.gradion-ai/ipybox", ["--sandbox"]),
        ("io.github.aybelatchane/mcp-server-terminal", ["--headless"]),
        ("io.github.bytedance/mcp-server-commands", ["cwd"]),
    ],
)
def test_optional_arguments_are_off_unless_set(name, absent) -> None:
    for pkg in detail(name).packages:
        if pkg.type in ("npm", "pypi"):
            args = unset_spec(pkg).args
            assert not set(absent) & set(args), (pkg.id, args)


def test_a_flag_set_true_is_passed_bare_and_a_positional_runtime_argument_goes_after_the_npm_package() -> None:
    pkg = detail("io.github.aybelatchane/mcp-server-terminal").packages[0]
    assert build_spec(pkg, omit=unset_keys(pkg.required_keys, {"headless": "true"})).args[-1] == "--headless"
    assert "--headless" not in build_spec(pkg, omit=unset_keys(pkg.required_keys, {"headless": "false"})).args
    cmds = detail("io.github.bytedance/mcp-server-commands").packages[2]
    args = build_spec(cmds, omit=unset_keys(cmds.required_keys, {"cwd": "/w", "port": "1"})).args
    assert args.index("@agent-infra/mcp-server-commands") < args.index("cwd")


# -- 5 ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name", ["io.github.mickymultani/crypto-bytes", "io.github.vandewilly/dice-roller", "io.github.Memphora/memphora"]
)
def test_a_python_module_command_runs_through_uvx_from_the_package(name) -> None:
    pkg = detail(name).packages[0]
    args = unset_spec(pkg).args
    assert args[:4] == ["--from", f"{pkg.identifier}=={pkg.version}", "python", "-m"]


# -- 6 ----------------------------------------------------------------------------------
def test_is_secret_is_authoritative_and_a_guess_is_marked_and_skips_public_values() -> None:
    keys = {k.name: k for p in detail("io.github.ONLYOFFICE/docspace").packages for k in p.required_keys}
    for name in ("DOCSPACE_REQUEST_AUTHORIZATION_HEADER", "DOCSPACE_OAUTH_AUTH_TOKEN_ALGORITHM"):
        assert keys[name].secret is False, name
    langfuse = {k.name: k for k in detail("io.github.langfuse/mcp-server-langfuse").packages[0].required_keys}
    assert langfuse["LANGFUSE_PUBLIC_KEY"].secret is False
    assert (langfuse["LANGFUSE_SECRET_KEY"].secret, langfuse["LANGFUSE_SECRET_KEY"].secret_guessed) == (True, True)
    assert langfuse["LANGFUSE_SECRET_KEY"].public()["secret_guessed"] is True
    keycloak = {
        k.name: k
        for k in detail("io.github.christophenglisch/keycloak-model-context-protocol").packages[0].required_keys
    }
    assert keycloak["KEYCLOAK_URL"].secret is False and keycloak["KEYCLOAK_ADMIN_PASSWORD"].secret is True


# -- 7 ----------------------------------------------------------------------------------
def test_every_optional_input_has_a_key_with_its_schema_fields() -> None:
    opik = {k.name: k.public() for k in detail("io.github.comet-ml/opik-mcp", "0.1.3").packages[0].required_keys}
    assert opik["OPIK_API_BASE_URL"] == {
        "name": "OPIK_API_BASE_URL",
        "description": opik["OPIK_API_BASE_URL"]["description"],
        "secret": False,
        "required": False,
        "placeholder": "http://localhost:5173/api",
    }
    codeweaver = {k.name: k.public() for k in detail("com.knitli/codeweaver").packages[0].required_keys}
    assert codeweaver["transport"]["choices"] == ["streamable-http", "stdio"]
    assert codeweaver["port"]["format"] == "number" and codeweaver["port"]["default"] == "9328"
    assert codeweaver["verbose"]["choices"] == ["true", "false"]


# -- 8 ----------------------------------------------------------------------------------
def test_mustache_and_literal_placeholders_become_required_settings_with_a_warning() -> None:
    aranet = detail("io.github.diegobit/aranet4-mcp-server").packages[0]
    assert "${PATH_TO_SRC}/aranet4-mcp-server/" in build_spec(aranet).args
    pushover = {k.name: k for k in detail("io.github.ashiknesin/pushover-mcp").packages[0].required_keys}
    assert (
        pushover["token"].required
        and pushover["token"].secret
        and "YOUR_TOKEN" in pushover["token"].public()["warning"]
    )
    spec = build_spec(detail("io.github.ashiknesin/pushover-mcp").packages[0])
    assert "YOUR_TOKEN" not in spec.args and "${token}" in spec.args
    macos = detail("io.github.baryhuang/mcp-remote-macos-use").packages[0]  # `-e NAME=your_…` as written
    password = {k.name: k for k in macos.required_keys}["MACOS_PASSWORD"]
    assert password.required and password.secret and password.in_argv  # the publisher put it on the command line
    assert "MACOS_PASSWORD=v" in fill(build_spec(macos), {k.name: "v" for k in macos.required_keys}).args


# -- 9, 10, 15 through the service -------------------------------------------------------
@pytest.fixture
async def runtime(tmp_path: Path, memory_keyring) -> AsyncIterator[Runtime]:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    hf = entry("co.huggingface/hf-mcp-server")
    old = json.loads(json.dumps(entry("io.github.comet-ml/opik-mcp", "0.1.3")))
    old.setdefault("_meta", {})["io.modelcontextprotocol.registry/official"] = {"status": "deprecated"}
    (catalog / "hf.json").write_text(json.dumps(hf))
    (catalog / "old.json").write_text(json.dumps(old))
    rt = build_runtime(
        Settings(home=tmp_path / "data", registries="local", catalog_dir=catalog), keyring_backend=memory_keyring
    )
    yield rt
    await rt.aclose()


async def call(rt: Runtime, tool: str, **args: Any) -> dict:
    return await rt.service.call(tool, args, CallContext())


@pytest.mark.anyio
async def test_get_shows_keys_per_option_and_the_chosen_options_keys(runtime) -> None:
    got = await call(runtime, "mcp_setup_get", qualified_name="co.huggingface/hf-mcp-server")
    assert got["package"] == "remote" and got["required_env_keys"] == []  # the default remote takes no header
    assert {p["id"]: [k["name"] for k in p["keys"]] for p in got["packages"]}["remote:2"] == ["Authorization"]


@pytest.mark.anyio
async def test_a_deprecated_entry_is_shown_as_such_and_refused_unless_allowed(runtime) -> None:
    name = "io.github.comet-ml/opik-mcp"
    got = await call(runtime, "mcp_setup_get", qualified_name=name)
    assert got["status"] == "deprecated" and got["detail"]["status"] == "deprecated"
    refused = await call(runtime, "mcp_setup_test_connection", qualified_name=name)
    assert refused["error"]["code"] == "deprecated"
    allowed = await call(runtime, "mcp_setup_test_connection", qualified_name=name, allow_deprecated=True)
    assert allowed["error"]["code"] != "deprecated"


@pytest.mark.anyio
async def test_an_installed_name_is_shown_installed_and_refused_before_any_prompt(runtime) -> None:
    name = "co.huggingface/hf-mcp-server"
    await __import__("asyncio").to_thread(
        runtime.store.servers.install,
        server_id="srv_x",
        qualified_name=name,
        source="local",
        version="1",
        package_type="remote",
        launch_spec={"transport": "streamable-http", "url": "http://127.0.0.1:9/mcp"},
        installed_by="agent",
        tools_hash="h",
        env={},
    )
    got = await call(runtime, "mcp_setup_get", qualified_name=name)
    assert (got["installed"], got["server_id"]) == (True, "srv_x")
    prompt = await call(runtime, "mcp_setup_request_secret", key_name="Authorization", prompt="token?", server=name)
    assert prompt["error"]["code"] == "already_installed" and not runtime.broker.pending()
    test = await call(runtime, "mcp_setup_test_connection", qualified_name=name)
    assert test["error"]["code"] == "already_installed"
