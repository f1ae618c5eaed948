"""Settings, read once at the edge (environment variables ``MCP_SETUP_*``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "service_version"]


def _default_home() -> Path:
    return Path.home() / ".local" / "share" / "mcp-setup"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MCP_SETUP_", extra="ignore")

    home: Path = Field(default_factory=_default_home, description="Data dir: database, key file, installs.")
    database_url: str | None = Field(default=None, description="Any SQLAlchemy URL; default SQLite in home.")
    secret_ttl_seconds: float = Field(
        default=900.0, gt=0, description="How long a secret ref and a remembered approval live (seconds)."
    )
    catalog_dir: Path | None = Field(default=None, description="Local catalog; default <home>/catalog.")
    probe_timeout_seconds: float = Field(default=60.0, gt=0, description="Deadline of a test-connect (seconds).")
    download_timeout_seconds: float = Field(
        default=300.0, gt=0, description="A first npx/uvx/docker run's download, before the probe's own deadline."
    )
    prefetch_packages: bool = Field(
        default=True,
        description="Fill npm's cache / docker pull / MCPB bundle cache while a secret prompt is open or after get.",
    )
    bundle_cache_bytes: int = Field(
        default=512 * 1024 * 1024, ge=0, description="Size cap of <home>/cache/bundles (MCPB bundles by sha256)."
    )
    adopt_tested_servers: bool = Field(
        default=True, description="An install right after a passing test keeps the tested process (one start)."
    )
    listen_notify: bool = Field(
        default=True, description="PostgreSQL: hear other replicas' changes at once (LISTEN/NOTIFY); the polling stays."
    )
    registries: str = Field(
        default="official,smithery,local", description="Which registries to search, comma-separated."
    )
    official_registry_url: str = Field(
        default="https://registry.modelcontextprotocol.io",
        description="The official MCP registry; a self-hosted one works too.",
    )
    smithery_url: str = Field(default="https://api.smithery.ai", description="Smithery's Platform API host.")
    smithery_api_key: SecretStr | None = Field(
        default=None,
        description="Smithery is skipped without it; a server hosted by Smithery gets it as its bearer token.",
    )
    registry_timeout_seconds: float = Field(
        default=8.0, gt=0, description="How long a search or lookup waits for one registry (seconds)."
    )
    package_preference: str = Field(
        default="",
        description="Order among npm, pypi, oci, nuget, mcpb, remote, comma-separated; "
        "empty: npm,pypi,oci,nuget,mcpb,remote.",
    )
    openai_base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint for --driver openai.")
    openai_model: str | None = Field(default=None, description="The model name for --driver openai.")
    openai_api_key: SecretStr | None = Field(
        default=None, description="The key for --driver openai; else the keyring entry mcp-setup/openai-api-key."
    )
    port: int = Field(default=8765, ge=0, le=65535, description="Port of `mcp-setup serve` (0 picks a free one).")
    secret_prompt_timeout_seconds: float = Field(
        default=600.0,
        gt=0,
        description="How long a setup waits for you to enter a secret, approve a launch or sign in (seconds).",
    )
    relay_retry_wait_seconds: float = Field(
        default=120.0,
        gt=0,
        description=(
            "How long an installed server that speaks only the 2025 protocol waits for a 2026-07-28 client "
            "to answer its question during a call (a form, a sampling request, its roots) by calling again "
            "(seconds); past it the server is answered with an error and you are told."
        ),
    )
    max_concurrent_probes: int = Field(
        default=4,
        ge=1,
        description="Test-connects that run at once; the rest wait their turn (a progress event says so).",
    )
    max_result_chars: int = Field(
        default=1024 * 1024,
        ge=0,
        description="A proxied tool result is cut beyond this many characters, with a note (0: no cap).",
    )
    # 15 minutes: a warm server restarts in about a second (a stub's cold start is under 1 s; an
    # npm server from a warm cache 1-2 s), a pause nobody notices after a quarter of an hour away,
    # while twenty servers left running hold hundreds of MB for the rest of the day.
    idle_stop_seconds: float = Field(
        default=900.0,
        ge=0,
        description="Stop an installed server unused this long (0 = never); it starts again on its next call. "
        "A server marked keep-running, one with an open subscription or a call in flight is never stopped.",
    )
    # 8,000 tokens: mcp-setup's own tools take about 2,200, which leaves room for 30 to 60 tools of
    # the installed servers (100 to 200 tokens each is typical) before anything is held back.
    tools_budget: int = Field(
        default=8000,
        ge=0,
        description="How many tokens of tool definitions `tools/list` may take (0 = list every tool). Over it, "
        "the tools used most recently (in any session) are listed, then others by server in install order as "
        "many as fit; the rest are found and called with "
        "mcp_setup_find_tools and mcp_setup_call_tool. Set here, it wins for this process over the budget saved "
        "on the page, which every mcp-setup without it uses.",
    )
    mcp_core: Literal["first-call", "after-initialize"] = Field(
        default="first-call",
        description="When `mcp-setup mcp` loads its core: on the first tool call (less memory idle) or at once.",
    )
    gateway_tools: Literal["all", "discover"] = Field(
        default="all",
        description="discover: the MCP face lists only the setup tools and mcp_setup_find_tools / mcp_setup_call_tool.",
    )
    tools_page_size: int = Field(
        default=1000,
        ge=1,
        description="Tools per `tools/list` answer of the MCP face; a client that follows nextCursor gets the rest "
        "(some clients read only the first page: docs/gateway.md).",
    )
    consent: Literal["ask", "never-ask"] = Field(
        default="ask", description="never-ask: no consent step before test/install (CI, scripted use)."
    )
    sandbox: Literal["auto", "bwrap", "landlock", "off"] = Field(
        default="auto",
        description="Where local servers run (docs/sandbox.md): auto = bubblewrap, else Landlock, else none; "
        "off runs them unisolated, as you (unsafe).",
    )
    # A team's gateway (docs/team.md): one data key named explicitly, a public host name.
    data_key_file: Path | None = Field(default=None, description="The data key file (0600) shared by a team.")
    data_key_keyring_entry: str | None = Field(default=None, description="Keyring user name of the data key.")
    public_host: str | None = Field(default=None, description="Host name clients use for `serve` (Host check).")
    public_url: str | None = Field(
        default=None,
        description="The address clients reach `serve` at when a proxy in front terminates TLS "
        "(https://HOST[:PORT], no path): the links it hands out name it; set at start, never read from a request.",
    )
    # Governance (docs/tool-registry.md): [[capability_providers]] and admission.
    config: Path | None = Field(default=None, description="config.toml; default <home>/config.toml.")

    @property
    def catalog_path(self) -> Path:
        return self.catalog_dir if self.catalog_dir is not None else self.home / "catalog"

    @property
    def config_path(self) -> Path:
        return self.config if self.config is not None else Path(self.home).expanduser() / "config.toml"

    @property
    def registry_names(self) -> list[str]:
        return [r.strip() for r in self.registries.split(",") if r.strip()]

    @property
    def preference(self) -> tuple[str, ...] | None:
        items = tuple(p.strip() for p in self.package_preference.split(",") if p.strip())
        return items or None


def service_version() -> str:
    """mcp-setup's own version (the setup tools' ``version`` in the tool registry)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mcp-setup")
    except PackageNotFoundError:
        return "unknown"
