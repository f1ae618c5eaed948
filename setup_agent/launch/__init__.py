"""From a registry entry to a running process: the launch spec (``spec.py``), registry
package to spec (``packages.py``, ``package_choice.py``), MCPB bundles (``bundle.py``,
``bundle_cache.py``, ``manifest.py``), the download phase (``fetch.py``, ``fetch_plans.py``,
``prefetch.py``; its failures read from the runner: ``fetch_errors.py``; sandboxed to the
registries a runner is configured for: ``fetch_sandbox.py``, ``registries.py``, given their
credentials only: ``registry_credentials.py``; npm's settings as npm reads them: ``npmrc.py``), artifact digests
for lock files (``digests.py``), the launch: the one place a
server's values are revealed, to start it or to reach it (``start.py``; a server's own program in
place of its runner: ``direct.py``), our stdio transport (``transport.py``), the client connection (``connector.py``),
scratch dirs (``scratch.py``), the sandbox servers start in (``sandbox.py``, ``landlock.py``; in words and grants:
``grants.py``; a path it hid from a failing server: ``hidden_paths.py``), its network (a server's own namespace: ``netns.py``, ``netns_bootstrap.py``; the proxy it reaches
out through: ``net_proxy.py``, under the person's ``net_policy.py``, recorded in ``net_record.py``, in words in ``net_words.py``; which mechanism
holds it: ``net_isolation.py``; one start's, owned with its process: ``server_net.py``), crash safety (``procs.py``), stderr lines (``stderr_lines.py``), who holds a local port
(``listeners.py``), known start failures with their repairs (``repairs.py``) and the runners that come
with mcp-setup (``runners.py``).

Imports store, secrets, errors and :mod:`registry_clients`; never gateway, oauth, setup or agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setup_agent.lazy import lazy_exports

if TYPE_CHECKING:
    from .bundle import fetch_bundle, unpack_bundle
    from .bundle_cache import BundleCache
    from .connector import HttpWatch, list_all_tools, open_client, tool_dicts
    from .digests import ArtifactDigests, digest_kind
    from .direct import DirectStarts
    from .fetch import Fetcher
    from .grants import NOT_ISOLATED, granted_paths, profile_words
    from .hidden_paths import note_hidden_path
    from .manifest import (
        Manifest,
        argv_secret_keys,
        move_argv_secrets,
        read_manifest,
        required_keys_from_manifest,
        spec_from_manifest,
    )
    from .net_isolation import NetIsolation, landlock_network, network_isolation
    from .net_policy import Endpoint, NetPolicy
    from .net_proxy import NetProxy, ProxyLimits
    from .net_record import NetRecord
    from .net_words import (
        NetworkState,
        after_test_words,
        allowing,
        holding_to_tested,
        network_state,
        network_words,
        seen_destinations,
    )
    from .netns import NetnsBridge
    from .netns_bootstrap import proxy_environment
    from .package_choice import (
        DEFAULT_PREFERENCE,
        RUNNERS,
        choose_package,
        describe_packages,
        runner_availability,
        unverified_download,
    )
    from .packages import build_spec, unset_keys
    from .prefetch import Prefetches
    from .procs import Owner, ProcessLedger, claim_dir, sweep_install_dirs
    from .repairs import apply_repair, explain_failure
    from .runners import bundled_runner, runner_source, runner_which, runner_words
    from .sandbox import USER_SECRETS, Sandbox, real_folder
    from .scratch import make_scratch_dir, sweep_scratch
    from .server_net import ServerNet, refused_words
    from .spec import LaunchSpec, ResolvedLaunch, Value, Values, fill, materialize, template_keys
    from .start import local_command, remote_endpoint
    from .stderr_lines import StderrLines
    from .transport import ProcessWatch, proxy_credentials

__all__ = [
    "allowing",
    "apply_repair",
    "argv_secret_keys",
    "build_spec",
    "bundled_runner",
    "BundleCache",
    "choose_package",
    "claim_dir",
    "DEFAULT_PREFERENCE",
    "describe_packages",
    "Endpoint",
    "explain_failure",
    "fetch_bundle",
    "ArtifactDigests",
    "digest_kind",
    "DirectStarts",
    "Fetcher",
    "fill",
    "granted_paths",
    "holding_to_tested",
    "HttpWatch",
    "landlock_network",
    "LaunchSpec",
    "list_all_tools",
    "local_command",
    "make_scratch_dir",
    "Manifest",
    "materialize",
    "move_argv_secrets",
    "NetIsolation",
    "NetnsBridge",
    "NetPolicy",
    "NetProxy",
    "NetRecord",
    "network_isolation",
    "network_state",
    "network_words",
    "NetworkState",
    "NOT_ISOLATED",
    "note_hidden_path",
    "open_client",
    "Owner",
    "Prefetches",
    "ProcessLedger",
    "ProcessWatch",
    "profile_words",
    "proxy_credentials",
    "proxy_environment",
    "ProxyLimits",
    "read_manifest",
    "real_folder",
    "refused_words",
    "remote_endpoint",
    "required_keys_from_manifest",
    "ResolvedLaunch",
    "runner_availability",
    "runner_source",
    "runner_which",
    "runner_words",
    "RUNNERS",
    "Sandbox",
    "USER_SECRETS",
    "seen_destinations",
    "ServerNet",
    "spec_from_manifest",
    "StderrLines",
    "sweep_install_dirs",
    "sweep_scratch",
    "template_keys",
    "after_test_words",
    "tool_dicts",
    "unpack_bundle",
    "unset_keys",
    "unverified_download",
    "Value",
    "Values",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "allowing": "net_words",
        "apply_repair": "repairs",
        "argv_secret_keys": "manifest",
        "build_spec": "packages",
        "BundleCache": "bundle_cache",
        "bundled_runner": "runners",
        "choose_package": "package_choice",
        "claim_dir": "procs",
        "DEFAULT_PREFERENCE": "package_choice",
        "describe_packages": "package_choice",
        "Endpoint": "net_policy",
        "explain_failure": "repairs",
        "fetch_bundle": "bundle",
        "ArtifactDigests": "digests",
        "digest_kind": "digests",
        "DirectStarts": "direct",
        "Fetcher": "fetch",
        "fill": "spec",
        "granted_paths": "grants",
        "HttpWatch": "connector",
        "landlock_network": "net_isolation",
        "LaunchSpec": "spec",
        "list_all_tools": "connector",
        "local_command": "start",
        "make_scratch_dir": "scratch",
        "Manifest": "manifest",
        "materialize": "spec",
        "move_argv_secrets": "manifest",
        "NetIsolation": "net_isolation",
        "NetnsBridge": "netns",
        "NetPolicy": "net_policy",
        "NetProxy": "net_proxy",
        "NetRecord": "net_record",
        "network_isolation": "net_isolation",
        "network_words": "net_words",
        "NetworkState": "net_words",
        "holding_to_tested": "net_words",
        "network_state": "net_words",
        "seen_destinations": "net_words",
        "after_test_words": "net_words",
        "NOT_ISOLATED": "grants",
        "note_hidden_path": "hidden_paths",
        "open_client": "connector",
        "Prefetches": "prefetch",
        "Owner": "procs",
        "ProcessLedger": "procs",
        "ProcessWatch": "transport",
        "profile_words": "grants",
        "proxy_credentials": "transport",
        "proxy_environment": "netns_bootstrap",
        "ProxyLimits": "net_proxy",
        "read_manifest": "manifest",
        "refused_words": "server_net",
        "remote_endpoint": "start",
        "required_keys_from_manifest": "manifest",
        "ResolvedLaunch": "spec",
        "runner_availability": "package_choice",
        "runner_source": "runners",
        "runner_which": "runners",
        "runner_words": "runners",
        "RUNNERS": "package_choice",
        "Sandbox": "sandbox",
        "real_folder": "sandbox",
        "USER_SECRETS": "sandbox",
        "ServerNet": "server_net",
        "spec_from_manifest": "manifest",
        "StderrLines": "stderr_lines",
        "sweep_install_dirs": "procs",
        "sweep_scratch": "scratch",
        "template_keys": "spec",
        "tool_dicts": "connector",
        "unpack_bundle": "bundle",
        "unset_keys": "packages",
        "unverified_download": "package_choice",
        "Value": "spec",
        "Values": "spec",
    },
)
