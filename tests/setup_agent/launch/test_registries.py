"""The registries a runner is configured for (setup_agent/launch/registries.py): the download
phase's only destinations, granted to a server's start, and named to the runner in the sandbox
where the user's config files are hidden."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from setup_agent.launch.net_policy import Lookup, NetPolicy, Verdict
from setup_agent.launch.registries import runner_registries, without_userinfo
from setup_agent.launch.sandbox import Profile, Sandbox
from setup_agent.launch.server_net import with_registries


def allowed(policy: NetPolicy, host: str, port: int) -> bool:
    verdict = policy.check(host, port)
    return isinstance(verdict, Lookup) or (isinstance(verdict, Verdict) and verdict.allowed)


def test_npm_reads_the_registry_of_its_command_line_its_environment_or_the_users_npmrc_else_npms_own(
    tmp_path: Path,
) -> None:
    policy, env = runner_registries("npm", ["exec", "--package=x"], {"HOME": str(tmp_path)})
    assert allowed(policy, "registry.npmjs.org", 443) and env == {}
    assert not allowed(policy, "evil.example", 443) and not allowed(policy, "127.0.0.1", 5432)

    (tmp_path / ".npmrc").write_text("; the user's own\nregistry = https://npm.corp.example:8443/\n")
    policy, env = runner_registries("npm", [], {"HOME": str(tmp_path)})
    assert allowed(policy, "npm.corp.example", 8443) and not allowed(policy, "registry.npmjs.org", 443)
    assert env == {"npm_config_registry": "https://npm.corp.example:8443/"}  # its .npmrc is hidden in there

    policy, env = runner_registries("npx", [], {"HOME": str(tmp_path), "NPM_CONFIG_REGISTRY": "http://10.0.0.7/"})
    assert allowed(policy, "10.0.0.7", 80)  # the person's own registry, on their network

    policy, _ = runner_registries("npm", ["--registry=http://127.0.0.1:4873"], {"HOME": str(tmp_path)})
    assert allowed(policy, "127.0.0.1", 4873) and [str(e) for e in policy.loopback_grants()] == ["127.0.0.1:4873"]


def test_uv_reads_pypi_or_the_indexes_it_is_configured_for_and_nothing_else() -> None:
    policy, env = runner_registries("uvx", ["--from", "x", "python", "-c", "pass"], {})
    assert allowed(policy, "pypi.org", 443) and allowed(policy, "files.pythonhosted.org", 443) and env == {}
    assert not allowed(policy, "github.com", 443)

    policy, env = runner_registries("uvx", [], {"UV_DEFAULT_INDEX": "https://pypi.corp.example/simple"})
    assert allowed(policy, "pypi.corp.example", 443) and not allowed(policy, "pypi.org", 443)
    assert env == {"UV_DEFAULT_INDEX": "https://pypi.corp.example/simple"}

    policy, _ = runner_registries("uv", ["--index", "mine=http://127.0.0.1:8080/simple"], {})
    assert allowed(policy, "127.0.0.1", 8080) and allowed(policy, "pypi.org", 443)  # an extra index, PyPI stays


def test_a_setting_that_is_no_url_names_no_registry_and_breaks_nothing() -> None:
    policy, env = runner_registries("npm", [], {"npm_config_registry": "not a url"})
    assert policy.mode == "strict" and not policy.only and env == {"npm_config_registry": "not a url"}
    assert runner_registries("docker", ["pull", "x"], {})[0].mode == "none"


def test_a_servers_start_is_granted_the_configured_registry_and_told_it_in_the_sandbox(tmp_path: Path) -> None:
    host_env = {"HOME": str(tmp_path / "user"), "NPM_CONFIG_REGISTRY": "http://10.0.0.7:4873/"}
    policy = with_registries(NetPolicy.strict(["api.example.com:443"]), ["-y", "pkg@1.0.0"], "npx", host_env)
    assert allowed(policy, "10.0.0.7", 4873) and allowed(policy, "api.example.com", 443)
    assert not allowed(with_registries(NetPolicy.strict([]), ["-y", "pkg@1.0.0"], "npx"), "10.0.0.7", 4873)
    box = Sandbox("bwrap", hide=(tmp_path / "data",), user_home=tmp_path / "user", host_env=host_env)
    if box.mechanism != "bwrap":
        pytest.skip(box.why)
    (tmp_path / "server").mkdir()
    npx = shutil.which("npx") or "/usr/bin/npx"
    _command, _args, env = box.wrap(npx, ["-y", "pkg@1.0.0"], {"PATH": "/usr/bin:/bin"}, Profile(tmp_path / "server"))
    assert env["npm_config_registry"] == "http://10.0.0.7:4873/"


def test_a_servers_start_sees_the_index_variables_without_their_logins(tmp_path: Path) -> None:
    host_env = {
        "HOME": str(tmp_path / "user"),
        "UV_DEFAULT_INDEX": "corp=https://alice:corp-pw@pypi.corp.example/simple",
        "PIP_EXTRA_INDEX_URL": "https://bob:pip-pw@extra.example/simple https://public.example/simple",
    }
    box = Sandbox("bwrap", hide=(tmp_path / "data",), user_home=tmp_path / "user", host_env=host_env)
    if box.mechanism != "bwrap":
        pytest.skip(box.why)
    (tmp_path / "server").mkdir()
    uvx = shutil.which("uvx") or "/usr/bin/uvx"
    _command, _args, env = box.wrap(uvx, ["x"], {"PATH": "/usr/bin:/bin"}, Profile(tmp_path / "server"))
    assert env["UV_DEFAULT_INDEX"] == "corp=https://pypi.corp.example/simple"
    assert env["PIP_EXTRA_INDEX_URL"] == "https://extra.example/simple https://public.example/simple"
    assert "-pw" not in json.dumps(env)


def test_an_index_setting_loses_only_its_user_names_and_passwords() -> None:
    assert without_userinfo("https://u:p%40ss@idx.example:8443/simple") == "https://idx.example:8443/simple"
    assert without_userinfo("corp=https://tok@idx.example/simple https://pub.example/simple") == (
        "corp=https://idx.example/simple https://pub.example/simple"
    )
    assert without_userinfo("not a url") == "not a url"
    _policy, env = runner_registries("npm", ["--registry=https://u:p@npm.corp.example/"], {})
    assert env == {"npm_config_registry": "https://npm.corp.example/"}


def test_a_scoped_package_whose_scope_has_its_own_registry_downloads_from_it_and_npms_default_for_its_dependencies(
    tmp_path: Path,
) -> None:
    (tmp_path / ".npmrc").write_text(
        "@acme:registry=http://127.0.0.1:4873/\n@other:registry=https://npm.other.example/\n"
    )
    home = {"HOME": str(tmp_path)}
    policy, env = runner_registries("npm", ["exec", "--yes", "--package=@acme/stub@1.0.0", "--call", ":"], home)
    assert allowed(policy, "127.0.0.1", 4873) and [str(e) for e in policy.loopback_grants()] == ["127.0.0.1:4873"]
    assert allowed(policy, "registry.npmjs.org", 443)  # its unscoped dependencies, npm's audit
    assert not allowed(policy, "npm.other.example", 443)  # another scope's registry
    assert env == {"npm_config_@acme:registry": "http://127.0.0.1:4873/"}  # its .npmrc is hidden in there
    # npx's form; the registry entry's --registry= is npm's default, the scope's own still wins
    policy, env = runner_registries("npx", ["-y", "--registry=https://npm.corp.example/", "@ACME/stub@1"], home)
    assert allowed(policy, "127.0.0.1", 4873) and allowed(policy, "npm.corp.example", 443)
    assert not allowed(policy, "registry.npmjs.org", 443)
    assert env["npm_config_@acme:registry"] == "http://127.0.0.1:4873/"
    # an argument of the server's own, after its package, is not npm's
    policy, _ = runner_registries("npx", ["-y", "@acme/stub@1", "--registry=https://evil.example/"], home)
    assert not allowed(policy, "evil.example", 443) and allowed(policy, "registry.npmjs.org", 443)
    # a package of no scope, or of a scope without a registry of its own: npm's registry only
    for spec in ("stub@1", "@nobody/stub@1"):
        policy, env = runner_registries("npx", ["-y", spec], home)
        assert not allowed(policy, "127.0.0.1", 4873) and env == {}


def test_npm_reads_the_registry_of_its_global_npmrc_below_the_users(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    (prefix / "etc").mkdir(parents=True)
    (prefix / "etc" / "npmrc").write_text(
        "registry=https://mirror.corp.example/\n@acme:registry=https://acme.example/\n"
    )
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PREFIX": str(prefix)}  # <prefix>/etc/npmrc, as npm finds it
    policy, named = runner_registries("npx", ["-y", "@acme/stub@1"], env)
    assert allowed(policy, "acme.example", 443) and allowed(policy, "mirror.corp.example", 443)
    assert not allowed(policy, "registry.npmjs.org", 443)
    assert named == {
        "npm_config_registry": "https://mirror.corp.example/",
        "npm_config_@acme:registry": "https://acme.example/",
    }
    (home / ".npmrc").write_text("registry=https://npm.user.example/\n")  # the user's wins
    policy, _ = runner_registries("npx", ["-y", "stub@1"], env)
    assert allowed(policy, "npm.user.example", 443) and not allowed(policy, "mirror.corp.example", 443)
    # the one npm_config_globalconfig names, instead
    (tmp_path / "global").write_text("@acme:registry=https://acme2.example/\n")
    policy, _ = runner_registries(
        "npx", ["-y", "@acme/stub@1"], {**env, "npm_config_globalconfig": str(tmp_path / "global")}
    )
    assert allowed(policy, "acme2.example", 443) and not allowed(policy, "acme.example", 443)


def test_npms_global_npmrc_is_found_below_the_node_that_runs_npm_as_npm_finds_it(tmp_path: Path) -> None:
    prefix = tmp_path / "node-prefix"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "etc").mkdir()
    node = prefix / "bin" / "node"
    node.write_text("#!/bin/sh\n")
    node.chmod(0o755)
    (prefix / "etc" / "npmrc").write_text("registry=https://mirror.corp.example/\n")
    env = {"HOME": str(tmp_path / "home"), "PATH": str(prefix / "bin")}
    policy, named = runner_registries("npx", ["-y", "stub@1"], env)
    assert allowed(policy, "mirror.corp.example", 443) and named == {
        "npm_config_registry": "https://mirror.corp.example/"
    }
    policy, _ = runner_registries("npx", ["-y", "stub@1"], {**env, "npm_config_prefix": str(tmp_path / "elsewhere")})
    assert not allowed(policy, "mirror.corp.example", 443) and allowed(policy, "registry.npmjs.org", 443)
