"""From a registry entry to a running process: the launch spec (``spec.py``), registry
package to spec (``packages.py``, ``package_choice.py``), MCPB bundles (``bundle.py``,
``bundle_cache.py``, ``manifest.py``), the download phase (``fetch.py``, ``fetch_plans.py``,
``prefetch.py``), artifact digests for lock files (``digests.py``), the launch: the one place a
server's values are revealed, to start it or to reach it (``start.py``), our stdio transport (``transport.py``) and the raw lane beside its SDK session (``raw_lane.py``), the client connection (``connector.py``),
scratch dirs (``scratch.py``), the sandbox servers start in (``sandbox.py``, ``landlock.py``; in words and grants:
``grants.py``), crash safety (``procs.py``), stderr lines (``stderr_lines.py``), who holds a local port
(``listeners.py``) and known start failures with their repairs (``repairs.py``).

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
    from .fetch import Fetcher
    from .grants import NOT_ISOLATED, granted_paths, profile_words
    from .lenient import fill_result
    from .manifest import (
        Manifest,
        argv_secret_keys,
        move_argv_secrets,
        read_manifest,
        required_keys_from_manifest,
        spec_from_manifest,
    )
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
    from .procs import ProcessLedger, claim_dir, sweep_install_dirs
    from .raw_lane import LANE_BASE, LaneClosed, RawLane
    from .repairs import apply_repair, explain_failure
    from .sandbox import Sandbox
    from .scratch import make_scratch_dir, sweep_scratch
    from .spec import LaunchSpec, ResolvedLaunch, Value, Values, fill, materialize, template_keys
    from .start import local_command, remote_endpoint
    from .stderr_lines import StderrLines
    from .transport import ProcessWatch, proxy_credentials

__all__ = [
    "apply_repair",
    "argv_secret_keys",
    "build_spec",
    "BundleCache",
    "choose_package",
    "claim_dir",
    "DEFAULT_PREFERENCE",
    "describe_packages",
    "explain_failure",
    "fetch_bundle",
    "ArtifactDigests",
    "digest_kind",
    "Fetcher",
    "fill",
    "fill_result",
    "granted_paths",
    "HttpWatch",
    "LANE_BASE",
    "LaneClosed",
    "LaunchSpec",
    "list_all_tools",
    "local_command",
    "make_scratch_dir",
    "Manifest",
    "materialize",
    "move_argv_secrets",
    "NOT_ISOLATED",
    "open_client",
    "Prefetches",
    "RawLane",
    "ProcessLedger",
    "ProcessWatch",
    "profile_words",
    "proxy_credentials",
    "read_manifest",
    "remote_endpoint",
    "required_keys_from_manifest",
    "ResolvedLaunch",
    "runner_availability",
    "RUNNERS",
    "Sandbox",
    "spec_from_manifest",
    "StderrLines",
    "sweep_install_dirs",
    "sweep_scratch",
    "template_keys",
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
        "apply_repair": "repairs",
        "argv_secret_keys": "manifest",
        "build_spec": "packages",
        "BundleCache": "bundle_cache",
        "choose_package": "package_choice",
        "claim_dir": "procs",
        "DEFAULT_PREFERENCE": "package_choice",
        "describe_packages": "package_choice",
        "explain_failure": "repairs",
        "fetch_bundle": "bundle",
        "ArtifactDigests": "digests",
        "digest_kind": "digests",
        "Fetcher": "fetch",
        "fill": "spec",
        "fill_result": "lenient",
        "granted_paths": "grants",
        "HttpWatch": "connector",
        "LANE_BASE": "raw_lane",
        "LaneClosed": "raw_lane",
        "LaunchSpec": "spec",
        "list_all_tools": "connector",
        "local_command": "start",
        "make_scratch_dir": "scratch",
        "Manifest": "manifest",
        "materialize": "spec",
        "move_argv_secrets": "manifest",
        "NOT_ISOLATED": "grants",
        "open_client": "connector",
        "Prefetches": "prefetch",
        "RawLane": "raw_lane",
        "ProcessLedger": "procs",
        "ProcessWatch": "transport",
        "profile_words": "grants",
        "proxy_credentials": "transport",
        "read_manifest": "manifest",
        "remote_endpoint": "start",
        "required_keys_from_manifest": "manifest",
        "ResolvedLaunch": "spec",
        "runner_availability": "package_choice",
        "RUNNERS": "package_choice",
        "Sandbox": "sandbox",
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
