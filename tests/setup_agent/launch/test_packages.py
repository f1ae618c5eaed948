"""Launch specs from registry packages, and package choice (setup_agent.launch.packages)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from registry_clients.models import Argument, PackageOption
from setup_agent.errors import InvalidEntry, NoRunnablePackage, PackageNotFound
from setup_agent.launch.packages import (
    DEFAULT_PREFERENCE,
    INSTALL_HINTS,
    RUNNERS,
    build_spec,
    choose_package,
    describe_packages,
    package_availability,
    registry_template,
)
from setup_agent.launch.spec import fill
from tests.helpers.paths import FIXTURES

FIXTURES = FIXTURES / "registry" / "official"
CANARY = "canary-7f3c9e1d-SECRET-must-not-reach-argv"


# --- a tiny local server.json → PackageOption helper (independent of serverjson.py) ---


def _seed(name: str, version: str) -> dict[str, Any]:
    for doc in json.loads((FIXTURES / "seed.json").read_text()):
        if doc["name"] == name and doc["version"] == version:
            return doc
    raise LookupError(name)


def _sample(name: str, version: str) -> dict[str, Any]:
    for item in json.loads((FIXTURES / "servers_sample_2025-12-18.json").read_text()):
        if item["server"]["name"] == name and item["server"]["version"] == version:
            return item["server"]
    raise LookupError(name)


def _argument(raw: dict[str, Any]) -> Argument:
    kind = raw.get("type") if raw.get("type") in ("positional", "named") else "positional"
    value = raw.get("value") or None
    wants = bool(raw.get("valueHint") or raw.get("isSecret") or raw.get("default"))
    key = None if value or not wants else (raw.get("name") or raw.get("valueHint") or "").lstrip("-") or None
    return Argument(
        type=kind,
        name=raw.get("name"),
        value=value,
        value_hint=raw.get("valueHint"),
        default=raw.get("default"),
        required=bool(raw.get("isRequired")),
        secret=bool(raw.get("isSecret")),
        key=key,
    )


def _option(pkg: dict[str, Any], id: str | None = None) -> PackageOption:
    transport = pkg.get("transport") or {"type": "stdio"}
    return PackageOption(
        id=id or pkg["registryType"],
        type=pkg["registryType"],
        identifier=pkg["identifier"],
        version=pkg.get("version"),
        file_sha256=pkg.get("fileSha256"),
        registry_base_url=pkg.get("registryBaseUrl"),
        runtime_hint=pkg.get("runtimeHint"),
        transport=transport["type"],
        url=transport.get("url"),
        headers={h["name"]: h.get("value") or "{%s}" % h["name"] for h in transport.get("headers") or []},
        runtime_arguments=[_argument(a) for a in pkg.get("runtimeArguments") or []],
        package_arguments=[_argument(a) for a in pkg.get("packageArguments") or []],
        env={e["name"]: e.get("value") or "{%s}" % e["name"] for e in pkg.get("environmentVariables") or []},
    )


def _remote(raw: dict[str, Any], id: str = "remote") -> PackageOption:
    return PackageOption(
        id=id,
        type="remote",
        identifier=raw["url"],
        transport=raw["type"],
        url=raw["url"],
        headers={h["name"]: h.get("value") or "{%s}" % h["name"] for h in raw.get("headers") or []},
    )


def _airtable() -> list[PackageOption]:
    return [_option(p) for p in _seed("io.github.domdomegg/airtable-mcp-server", "1.7.2")["packages"]]


def _which(*present: str):
    return lambda name: f"/usr/bin/{name}" if name in present else None


def _argv(resolved) -> list[str]:
    return [resolved.command or "", *resolved.args]


# --- build_spec: real sample entries -------------------------------------------------


def test_airtable_npm_package_runs_npx_with_pinned_version_and_key_in_env():
    spec = build_spec(_airtable()[0])
    assert (spec.command, spec.runner, spec.package_type) == ("npx", "npx", "npm")
    assert spec.args == ["-y", "airtable-mcp-server@1.7.2"]
    assert spec.env == {"AIRTABLE_API_KEY": "${AIRTABLE_API_KEY}"}
    assert spec.keys() == {"AIRTABLE_API_KEY"}


def test_airtable_oci_package_passes_the_secret_only_through_dockers_environment():
    spec = build_spec(_airtable()[1])
    assert spec.command == "docker"
    assert spec.args == [
        "run",
        "-i",
        "--rm",
        "-e",
        "AIRTABLE_API_KEY",
        "docker.io/domdomegg/airtable-mcp-server:1.7.2",
    ]
    resolved = fill(spec, {"AIRTABLE_API_KEY": CANARY})
    assert not any(CANARY in item for item in _argv(resolved))
    assert resolved.env == {"AIRTABLE_API_KEY": CANARY}


def test_oci_runtime_env_argument_with_a_secret_variable_moves_into_the_environment():
    pkg = _option(_sample("io.github.SamYuan1990/i18n-agent-action", "mcp")["packages"][0])
    # as published it serves on example.com (refused: see the invalid_entry test); the
    # environment handling is the same for its stdio form
    spec = build_spec(pkg.model_copy(update={"transport": "stdio", "url": None}))
    values = {
        "api_key": CANARY,
        "models_path": "/models",
        "encoder_file": "e.onnx",
        "decoder_file": "d.onnx",
        "tokens_file": "t.onnx",
    }
    resolved = fill(spec, values)
    assert not any(CANARY in item for item in _argv(resolved))
    assert resolved.env["api_key"] == CANARY
    assert resolved.args[:5] == ["run", "-i", "--rm", "-e", "api_key"]
    assert ["-v", "/models:/app/models"] == resolved.args[resolved.args.index("-v") : resolved.args.index("-v") + 2]
    assert resolved.args[-1] == "ghcr.io/SamYuan1990/i18n-agent-action:mcp"


def test_airtable_mcpb_package_needs_an_install_dir_and_has_no_command_yet():
    spec = build_spec(_airtable()[2])
    assert spec.package_type == "mcpb" and spec.needs_install_dir
    assert spec.command is None and spec.runner is None
    assert spec.identifier.endswith("/v1.7.2/airtable-mcp-server.mcpb")
    assert spec.file_sha256 == "8220de07a08ebe908f04da139ea03dbfe29758141347e945da60535fb7bcca20"


def test_pypi_package_runs_uvx_with_an_exact_version():
    pkg = _option(_seed("io.github.domdomegg/time-mcp-pypi", "1.0.6")["packages"][0])
    spec = build_spec(pkg)
    assert (spec.command, spec.args, spec.runner) == ("uvx", ["time-mcp-pypi==1.0.6"], "uvx")


def test_nuget_package_runs_dnx_with_yes():
    pkg = _option(_seed("io.github.domdomegg/time-mcp-nuget", "1.0.8")["packages"][0])
    spec = build_spec(pkg)
    assert (spec.command, spec.args, spec.runner) == ("dnx", ["TimeMcpServer@1.0.8", "--yes"], "dnx")


def test_nuget_package_arguments_follow_a_double_dash_and_env_variables_are_templated():
    pkg = _option(_sample("com.joelverhagen.mcp/Knapcode.SampleMcpServer", "0.10.0-beta.10")["packages"][0])
    spec = build_spec(pkg)
    assert spec.args == ["Knapcode.SampleMcpServer@0.10.0-beta.10", "--yes", "--", "mcp", "start"]
    assert spec.env == {"WEATHER_CHOICES": "${weather_choices}"}
    assert fill(spec, {"weather_choices": "sunny,rainy"}).env == {"WEATHER_CHOICES": "sunny,rainy"}


def test_named_arguments_with_variables_give_the_flag_then_the_templated_value():
    pkg = _option(_sample("com.knitli/codeweaver", "0.1.0-alpha.3")["packages"][1])
    spec = build_spec(pkg)
    args = spec.args
    assert args[args.index("-v") + 1] == "${workspace}:/workspace:ro"
    assert args[args.index("-p") + 1] == "${host_port}:9328"
    assert args[args.index("--network") + 1] == "${network}"
    assert spec.env["CODEWEAVER_PROJECT_PATH"] == "/workspace"  # `-e NAME=value` moved into env
    values = {"workspace": "/home/me/my code", "host_port": "9000", "network": "bridge"}
    spec = build_spec(pkg, omit=spec.keys() - values.keys())  # ~60 optional env vars left unset
    resolved = fill(spec, values)
    assert "/home/me/my code:/workspace:ro" in resolved.args  # one argv item, spaces and all
    assert resolved.args[resolved.args.index("docker.io/knitli/codeweaver:0.1.0-alpha.3") + 1 :][:1] == ["server"]


def test_positional_argument_fed_by_a_user_key_is_its_own_argv_item():
    pkg = _option(_sample("io.github.cmd8/excalidraw-mcp", "1.2.0")["packages"][0])
    spec = build_spec(pkg)
    assert spec.args == ["-y", "@cmd8/excalidraw-mcp@1.2.0", "${diagram}"]
    value = "/tmp/my diagram; rm -rf ~ $(x).excalidraw"
    assert fill(spec, {"diagram": value}).args[-1] == value


def test_latest_or_missing_version_is_not_pinned():
    pkg = _option(_sample("io.github.bytedance/mcp-server-commands", "1.0.0")["packages"][0])
    assert build_spec(pkg).args[:2] == ["-y", "@agent-infra/mcp-server-commands"]
    bare = PackageOption(id="pypi", type="pypi", identifier="mcp-thing")
    assert build_spec(bare).args == ["mcp-thing"]
    latest = PackageOption(id="nuget", type="nuget", identifier="Some.Tool", version="latest")
    assert build_spec(latest).args == ["Some.Tool", "--yes"]


def test_smithery_remote_bearer_header_is_templated_and_has_no_command():
    server = _sample("ai.smithery/smithery-ai-github", "1.0.0")
    spec = build_spec(_remote(server["remotes"][0]))
    assert (spec.transport, spec.command, spec.runner) == ("streamable-http", None, None)
    assert spec.url == "https://server.smithery.ai/@smithery-ai/github/mcp"
    assert spec.headers == {"Authorization": "Bearer ${smithery_api_key}"}
    assert fill(spec, {"smithery_api_key": CANARY}).headers == {"Authorization": f"Bearer {CANARY}"}


def test_url_variables_are_templated_for_packages_and_remotes():
    pkg = _option(_sample("io.github.bytedance/mcp-server-commands", "1.0.0")["packages"][1], id="npm:2")
    spec = build_spec(pkg)
    assert (spec.transport, spec.url, spec.command) == ("sse", "http://127.0.0.1:${port}/sse", "npx")
    assert spec.args[spec.args.index("port") + 1] == "${port}"
    # The fixtures hold no remote with URL variables; this one follows the schema's RemoteTransport.
    remote = _remote({"type": "sse", "url": "https://{tenant}.example.com/mcp?region={region}"})
    resolved = fill(build_spec(remote), {"tenant": "acme", "region": "eu"})
    assert resolved.url == "https://acme.example.com/mcp?region=eu"


# --- build_spec: template and argv rules ---------------------------------------------


def test_literal_dollar_is_escaped_and_odd_braces_stay_literal():
    assert registry_template("a$b{KEY}") == "a$$b${KEY}"
    assert registry_template("HF_{optional token}") == "HF_{optional token}"
    assert registry_template("${input:vaultPath}") == "$${input:vaultPath}"
    assert registry_template("${NOT_A_PLACEHOLDER}") == "$${NOT_A_PLACEHOLDER}"
    pkg = PackageOption(id="npm", type="npm", identifier="x", env={"P": "pa$$word-{KEY}"})
    assert fill(build_spec(pkg), {"KEY": "k"}).env == {"P": "pa$$word-k"}


def test_named_argument_whose_name_holds_equals_is_one_argv_item():
    pkg = PackageOption(
        id="npm",
        type="npm",
        identifier="x",
        version="1.0.0",
        package_arguments=[
            Argument(type="named", name="--token=", key="TOKEN"),
            Argument(type="named", name="--port", value="8080"),
            Argument(type="named", name="--headless", flag=True, required=True),
        ],
    )
    assert build_spec(pkg).args == ["-y", "x@1.0.0", "--token=${TOKEN}", "--port", "8080", "--headless"]


def test_runtime_arguments_come_before_the_package_and_package_arguments_after():
    pkg = PackageOption(
        id="npm",
        type="npm",
        identifier="@scope/srv",
        version="2.0.0",
        runtime_arguments=[Argument(type="named", name="--node-options", value="--max-old-space-size=512")],
        package_arguments=[Argument(type="positional", value="serve")],
    )
    assert build_spec(pkg).args == ["-y", "--node-options", "--max-old-space-size=512", "@scope/srv@2.0.0", "serve"]


def test_omitted_optional_keys_drop_their_env_vars_and_arguments():
    pkg = _option(_sample("io.github.comet-ml/opik-mcp", "0.1.3")["packages"][0])
    pkg.package_arguments = [Argument(type="named", name="--workspace", key="WS", value_hint="dir")]
    spec = build_spec(pkg, omit={"OPIK_API_BASE_URL", "OPIK_WORKSPACE_NAME", "WS"})
    assert spec.env == {"OPIK_API_KEY": "${OPIK_API_KEY}"}
    assert "--workspace" not in spec.args
    assert fill(spec, {"OPIK_API_KEY": CANARY}).env == {"OPIK_API_KEY": CANARY}


def test_required_argument_without_value_or_key_is_refused():
    pkg = PackageOption(
        id="npm",
        type="npm",
        identifier="x",
        package_arguments=[Argument(type="positional", value_hint="path", required=True)],
    )
    with pytest.raises(InvalidEntry, match="path"):
        build_spec(pkg)


def test_oci_image_gets_its_version_tag_and_a_custom_registry_host():
    plain = PackageOption(
        id="oci",
        type="oci",
        identifier="pinecone-io/assistant-mcp",
        version="0.1.0",
        registry_base_url="https://docker.io",
    )
    assert build_spec(plain).args == ["run", "-i", "--rm", "pinecone-io/assistant-mcp:0.1.0"]
    ghcr = PackageOption(id="oci", type="oci", identifier="org/img", version="2", registry_base_url="https://ghcr.io")
    assert build_spec(ghcr).args[-1] == "ghcr.io/org/img:2"
    tagged = PackageOption(id="oci", type="oci", identifier="localhost:5000/img:1", version="9")
    assert build_spec(tagged).args[-1] == "localhost:5000/img:1"


# --- availability and choice ---------------------------------------------------------


def test_runner_table_and_install_hints_cover_every_package_type():
    assert RUNNERS == {"npm": "npx", "pypi": "uvx", "oci": "docker", "nuget": "dnx", "mcpb": None, "remote": None}
    assert all(INSTALL_HINTS[r] for r in RUNNERS.values() if r)
    assert set(DEFAULT_PREFERENCE) == set(RUNNERS)


def test_remote_and_mcpb_are_available_without_any_runner():
    remote = PackageOption(id="remote", type="remote", identifier="https://x", url="https://x")
    assert package_availability(remote, which=_which()) == (True, None)
    assert package_availability(_airtable()[2], which=_which()) == (True, None)


def test_default_choice_takes_the_first_available_package_in_preference_order():
    pkgs = _airtable()
    assert choose_package(pkgs, None, which=_which("npx", "docker")).id == "npm"
    assert choose_package(pkgs, None, which=_which("docker")).id == "oci"
    assert choose_package(pkgs, None, which=_which()).id == "mcpb"


def test_preference_order_is_configurable_and_unlisted_types_rank_last():
    pkgs = _airtable()
    assert choose_package(pkgs, None, preference=("oci", "npm"), which=_which("npx", "docker")).id == "oci"
    assert choose_package(pkgs, None, preference=("pypi",), which=_which()).id == "mcpb"


def test_explicit_id_or_type_is_honoured():
    pkgs = [*_airtable(), PackageOption(id="npm:2", type="npm", identifier="other", version="1")]
    which = _which("npx", "docker")
    assert choose_package(pkgs, "oci", which=which).id == "oci"
    assert choose_package(pkgs, "npm:2", which=which).identifier == "other"
    assert choose_package(pkgs, "mcpb", which=which).id == "mcpb"


def test_unknown_package_is_refused_listing_the_ids_available():
    with pytest.raises(PackageNotFound) as err:
        choose_package(_airtable(), "pypi", which=_which("npx"))
    assert "npm, oci, mcpb" in err.value.message
    assert err.value.details["packages"] == ["npm", "oci", "mcpb"]


def test_chosen_package_whose_runner_is_missing_names_the_runner_and_how_to_get_it():
    with pytest.raises(NoRunnablePackage) as err:
        choose_package(_airtable(), "oci", which=_which("npx"))
    assert "docker" in err.value.message and INSTALL_HINTS["docker"] in err.value.message


def test_no_runnable_package_names_each_missing_runner_and_its_hint():
    pkgs = [
        PackageOption(id="npm", type="npm", identifier="a"),
        PackageOption(id="pypi", type="pypi", identifier="b"),
        PackageOption(id="nuget", type="nuget", identifier="c"),
        PackageOption(id="npm:2", type="npm", identifier="d"),
    ]
    with pytest.raises(NoRunnablePackage) as err:
        choose_package(pkgs, None, which=_which("docker"))
    msg = err.value.message
    for runner in ("npx", "uvx", "dnx"):
        assert runner in msg and INSTALL_HINTS[runner] in msg
    assert msg.count("npx (") == 1
    assert err.value.details["missing_runners"] == ["npx", "uvx", "dnx"]


def test_server_without_packages_has_nothing_runnable():
    with pytest.raises(NoRunnablePackage, match="nothing runnable"):
        choose_package([], None, which=_which("npx"))


def test_describe_packages_reports_availability_and_reason_for_get():
    described = describe_packages(_airtable(), which=_which("docker"))
    assert described[1:] == [
        {"id": "oci", "type": "oci", "available": True},
        {"id": "mcpb", "type": "mcpb", "available": True},
    ]
    assert described[0]["available"] is False and "npx" in described[0]["reason"]


# --- cross-check against registry_clients.serverjson, when it is there ----------------


def _all_sample_details():
    serverjson = pytest.importorskip("registry_clients.serverjson")
    docs = json.loads((FIXTURES / "servers_sample_2025-12-18.json").read_text())
    docs += json.loads((FIXTURES / "seed.json").read_text())
    docs += json.loads((FIXTURES / "seed_2025-09-29.json").read_text())
    return [serverjson.parse_server_json(doc, source="official") for doc in docs]


def test_every_real_sample_package_builds_and_oci_env_secrets_never_reach_argv():
    built = 0
    from tests.helpers.registry_judge import REFUSED

    for detail in _all_sample_details():
        for pkg in detail.packages:
            if (detail.qualified_name, pkg.id) in REFUSED:  # listed, with reasons, in the judge
                with pytest.raises(InvalidEntry):
                    build_spec(pkg)
                continue
            spec = build_spec(pkg)
            built += 1
            values = {k.name: f"{CANARY}-{k.name}" if k.secret else "v" for k in pkg.required_keys}
            values.update(dict.fromkeys(spec.keys() - values.keys(), "v"))
            resolved = fill(spec, values, dirname="/d")
            if pkg.type == "oci":
                env_secrets = [k.name for k in pkg.required_keys if k.secret and not k.in_argv]
                argv = " ".join(_argv(resolved))
                assert not any(f"{CANARY}-{name}" in argv for name in env_secrets), detail.qualified_name
    assert built > 590
