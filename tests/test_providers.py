"""Capability providers from config.toml: id normalization, duplicates, eligibility, coverage,
malformed files, and opt-in admission refusing before anything is downloaded or started."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from app.runtime import Runtime, build_runtime
from app.settings import Settings
from setup_agent.errors import ConfigInvalid, NotAdmitted
from setup_agent.setup.providers import load_provider_config, normalize_provider_id, parse_provider_config
from setup_agent.setup.service import CallContext
from tests.fakes.file_server import serve_bundle_catalog
from tests.processes import processes_mentioning
from tests.timeouts import scaled

STUB = "io.github.acme/stub"


def provider(
    id_: str = "acme", *, source: str = "io.github.acme", trust: str = "trusted", enabled: str = "true"
) -> str:
    return (
        "[[capability_providers]]\n"
        f'id = "{id_}"\ndisplay_name = "Acme"\nsource_uri = "{source}"\nsource_digest = "sha256:00"\n'
        f'trust_state = "{trust}"\nenabled = {enabled}\n'
    )


# -- normalization, duplicates, eligibility -----------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("Acme Tools", "acme-tools"),
        ("acme_tools", "acme-tools"),
        (" ACME--tools ", "acme-tools"),
        ("acme.tools/", "acme-tools"),
        ("ＡＣＭＥ　Ｔｏｏｌｓ", "acme-tools"),  # full-width letters and space (NFKC)
        ("Straße Werkzeuge", "strasse-werkzeuge"),  # case-folded, not just lower-cased
        ("Äcme Tööls", "äcme-tööls"),  # letters outside ASCII are letters
        ("acme", "acme"),
        ("--", ""),
    ],
)
def test_provider_ids_are_normalized_before_any_check(raw: str, normalized: str) -> None:
    assert normalize_provider_id(raw) == normalized


def test_two_ids_that_normalize_alike_are_rejected_naming_both_lines(tmp_path: Path) -> None:
    text = (
        "# providers\n\n"
        + provider("Acme Tools")
        + "\n"
        + provider("other", source="io.other")
        + "\n"
        + provider(" ACME--tools ")
    )
    with pytest.raises(ConfigInvalid) as caught:
        parse_provider_config(text, tmp_path / "config.toml")
    message = caught.value.message
    assert str(tmp_path / "config.toml") in message
    assert "line 19" in message and "line 3" in message, message
    assert "acme-tools" in message


@pytest.mark.parametrize(
    ("enabled", "trust", "eligible"),
    [
        ("true", "trusted", True),
        ("true", "TRUSTED", True),
        ("false", "trusted", False),
        ("true", "untrusted", False),
        ("false", "untrusted", False),
        ("true", "revoked", False),
        ("true", "pending-review", False),
    ],
)
def test_a_provider_is_eligible_only_when_enabled_and_trusted(
    tmp_path: Path, enabled: str, trust: str, eligible: bool
) -> None:
    config = parse_provider_config(provider(trust=trust, enabled=enabled), tmp_path / "config.toml")
    assert config.providers[0].eligible is eligible


def test_missing_trust_state_means_untrusted_and_missing_enabled_means_enabled(tmp_path: Path) -> None:
    text = '[[capability_providers]]\nid = "acme"\nsource_uri = "io.github.acme"\n'
    (only,) = parse_provider_config(text, tmp_path / "c.toml").providers
    assert only.enabled is True and only.trust_state == "untrusted" and not only.eligible


def test_a_missing_file_is_an_empty_config_that_refuses_nothing(tmp_path: Path) -> None:
    config = load_provider_config(tmp_path / "nope" / "config.toml")
    assert config.providers == () and config.admission == "off" and not config.loaded
    config.admit("io.anything/at-all", None)  # no exception
    assert config.provider_for("io.anything/at-all") is None


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("admission = ", "not valid TOML"),
        ('admission = "everyone"', "'admission'"),
        ('capability_providers = "acme"', "capability_providers"),
        ('[[capability_providers]]\nsource_uri = "io.x"\n', "'id'"),
        ('[[capability_providers]]\nid = "a"\n', "'source_uri'"),
        ('[[capability_providers]]\nid = "a"\nsource_uri = "io.x"\nenabled = "yes"\n', "'enabled'"),
        ('[[capability_providers]]\nid = "a"\nsource_uri = "io.x"\ntrust = "trusted"\n', "'trust'"),
        ('[[capability_providers]]\nid = "!!"\nsource_uri = "io.x"\n', "'id'"),
    ],
)
def test_a_malformed_file_is_an_error_naming_the_file_and_the_field(tmp_path: Path, text: str, names: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigInvalid) as caught:
        load_provider_config(path)
    assert str(path) in caught.value.message and names in caught.value.message, caught.value.message


@pytest.mark.parametrize(
    ("source", "qualified_name", "repository", "covered"),
    [
        ("io.github.acme", "io.github.acme/stub", None, True),
        ("IO.GitHub.Acme", "io.github.acme/stub", None, True),
        ("io.github.acme", "io.github.acme-evil/stub", None, False),
        ("io.github.acme/stub", "io.github.acme/stub", None, True),
        ("io.github.acme/stub", "io.github.acme/stub-2", None, False),
        ("https://github.com/acme", "io.github.acme/stub", None, True),  # the owner's namespace
        ("https://github.com/acme", "io.github.acmeco/stub", None, False),
        ("https://github.com/acme/stub", "com.example/stub", "https://github.com/acme/stub.git", True),
        ("https://github.com/acme/", "com.example/stub", "https://GitHub.com/acme/stub", True),
        ("https://github.com/acme", "com.example/stub", "https://github.com/acme-evil/stub", False),
        ("https://gitlab.com/acme", "io.github.acme/stub", None, False),
    ],
)
def test_a_provider_covers_servers_by_namespace_name_or_repository(
    tmp_path: Path, source: str, qualified_name: str, repository: str | None, covered: bool
) -> None:
    (only,) = parse_provider_config(provider(source=source), tmp_path / "c.toml").providers
    assert only.covers(qualified_name, repository) is covered


def test_admission_names_the_rule_and_prefers_an_eligible_provider(tmp_path: Path) -> None:
    text = 'admission = "eligible-providers"\n' + provider("first", trust="untrusted") + provider("second")
    config = parse_provider_config(text, tmp_path / "c.toml")
    assert config.provider_for(STUB).id == "second"
    config.admit(STUB, None)
    with pytest.raises(NotAdmitted) as caught:
        config.admit("io.other/thing", None)
    assert caught.value.code == "not_admitted"
    assert (
        'admission = "eligible-providers"' in caught.value.message
        and "no capability provider covers it" in caught.value.message
    )
    lonely = parse_provider_config(
        'admission = "eligible-providers"\n' + provider(enabled="false"), tmp_path / "c.toml"
    )
    with pytest.raises(NotAdmitted, match="'acme' is not eligible"):
        lonely.admit(STUB, None)


# -- admission through the tools: before any download --------------------------------------


@pytest.fixture
def bundle_server(tmp_path: Path, canary: str) -> Iterator[tuple[Path, list[str]]]:
    """A local catalog whose bundle is served over loopback HTTP, counting every hit."""
    with serve_bundle_catalog(tmp_path, canary, STUB) as (catalog, hits, _sha):
        yield catalog, hits


def runtime_for(tmp_path: Path, catalog: Path, keyring, config: str | None) -> Runtime:
    path = tmp_path / "config.toml"
    if config is not None:
        path.write_text(config)
    settings = Settings(
        home=tmp_path / "data", registries="local", catalog_dir=catalog, probe_timeout_seconds=scaled(10), config=path
    )
    return build_runtime(settings, keyring_backend=keyring)


async def tool(runtime: Runtime, name: str, **args) -> dict:
    return await runtime.service.call(name, args, CallContext(installed_by="agent"))


@pytest.mark.anyio
@pytest.mark.parametrize(
    "config",
    [
        'admission = "eligible-providers"\n',  # no provider at all
        'admission = "eligible-providers"\n' + provider(trust="untrusted"),
        'admission = "eligible-providers"\n' + provider(enabled="false"),
        'admission = "eligible-providers"\n' + provider(source="io.github.someone-else"),
    ],
)
async def test_admission_refuses_test_and_install_before_the_bundle_is_downloaded(
    tmp_path: Path, bundle_server, memory_keyring, canary: str, config: str
) -> None:
    catalog, hits = bundle_server
    runtime = runtime_for(tmp_path, catalog, memory_keyring, config)
    try:
        ref = runtime.refs.mint("STUB_API_KEY", canary)
        with anyio.fail_after(scaled(20)):
            tested = await tool(
                runtime, "mcp_setup_test_connection", qualified_name=STUB, env_refs={"STUB_API_KEY": ref}
            )
            installed = await tool(
                runtime, "mcp_setup_install_and_connect", qualified_name=STUB, env_refs={"STUB_API_KEY": ref}
            )
        for result in (tested, installed):
            assert result["ok"] is False and result["error"]["code"] == "not_admitted", result
            assert "eligible-providers" in result["error"]["message"]
        assert hits == []  # the bundle server was never asked
        assert runtime.store.servers.list() == []
        assert not processes_mentioning(str(tmp_path / "data"))
        assert canary not in json.dumps([tested, installed])
        assert runtime.refs.resolve({"STUB_API_KEY": ref})["STUB_API_KEY"].reveal() == canary  # still usable
    finally:
        await runtime.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    "config",
    [
        None,  # no file: today's behaviour
        provider(trust="untrusted"),  # providers but no admission line: nothing is refused
        'admission = "eligible-providers"\n' + provider(source="https://github.com/acme"),
    ],
)
async def test_an_admitted_or_ungoverned_server_is_tested_as_before(
    tmp_path: Path, bundle_server, memory_keyring, canary: str, config: str | None
) -> None:
    catalog, hits = bundle_server
    runtime = runtime_for(tmp_path, catalog, memory_keyring, config)
    try:
        assert (runtime.service.admit is None) is (config is None or "admission" not in config)
        ref = runtime.refs.mint("STUB_API_KEY", canary)
        with anyio.fail_after(scaled(30)):
            tested = await tool(
                runtime, "mcp_setup_test_connection", qualified_name=STUB, env_refs={"STUB_API_KEY": ref}
            )
        assert tested.get("ok") is True, tested
        assert hits, "the bundle is downloaded for a test"
    finally:
        await runtime.aclose()


def test_the_documented_config_example_is_a_valid_config() -> None:
    readme = (Path(__file__).resolve().parent.parent / "docs" / "tool-registry.md").read_text()
    example = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    config = parse_provider_config(example, Path("docs/tool-registry.md"))
    assert config.admission == "eligible-providers"
    assert [p.id for p in config.providers] == ["acme-tools", "internal"]
    assert config.provider_for("io.github.acme/search").id == "acme-tools"
    assert config.provider_for("com.example/wiki").id == "internal"
