"""Render bench results as Markdown and put them into bench/README.md between markers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

START = "<!-- results:start -->"
END = "<!-- results:end -->"


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x * 1000:.0f} ms" if x < 10 else f"{x:.1f} s"


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f} s"


def _ratio(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}×"


def _ok(cond: bool | None) -> str:
    return "—" if cond is None else ("**met**" if cond else "**missed**")


def _med(d: dict[str, Any], key: str) -> float | None:
    v = d.get(key)
    return v.get("median") if isinstance(v, dict) else None


def render(results: dict[str, Any]) -> str:
    s = results.get("sections", {})
    rows: list[list[str]] = []
    notes: list[str] = []

    def err(name: str) -> str | None:
        r = s.get(name)
        if r is None:
            return "not run"
        return r.get("error")

    # 1 and 2 --------------------------------------------------------------------------
    if (e := err("probe")) is None:
        p1, p2 = s["probe"]["item1"], s["probe"]["item2"]
        r = p1["ratio_probe_sdk"]
        rows.append(
            [
                "1",
                f"test-connect: `Prober.probe` vs SDK `ClientSession` initialize + tools/list (same stub, {p1['probe']['n']} interleaved rounds)",
                _ms(_med(p1, "probe")),
                _ms(_med(p1, "sdk")),
                _ratio(r),
                "≤ 1.10×",
                _ok(r <= 1.10),
            ]
        )
        pr, sd = p1["probe"], p1["sdk"]
        rows.append(
            [
                "1",
                f"… spread (#17 item 6): probe min / median / max {_ms(pr['min'])} / {_ms(pr['median'])} / {_ms(pr['max'])}; SDK {_ms(sd['min'])} / {_ms(sd['median'])} / {_ms(sd['max'])}; per-round ratio {_ratio(p1.get('per_round_ratio_probe_sdk'))}",
                _ms(pr["min"]),
                _ms(sd["min"]),
                _ratio(p1.get("min_ratio_probe_sdk")),
                "info",
                "ratio of the minima",
            ]
        )
        if p1.get("probe_legacy"):
            rows.append(
                [
                    "1",
                    "… the probe with the classic handshake only (no `server/discover` round trip) vs SDK `ClientSession`",
                    _ms(_med(p1, "probe_legacy")),
                    _ms(_med(p1, "sdk")),
                    _ratio(p1["ratio_probe_legacy_sdk"]),
                    "info",
                    "",
                ]
            )
        rows.append(
            [
                "1",
                '… vs SDK `mcp.Client(mode="auto")` (the same discover → initialize fallback the probe does)',
                _ms(_med(p1, "probe")),
                _ms(_med(p1, "sdk_auto")),
                _ratio(p1["ratio_probe_sdk_auto"]),
                "info",
                "",
            ]
        )
        rows.append(
            [
                "1",
                "… SDK `ClientSession` timed to the end of its `async with` (teardown included)",
                _ms(_med(p1, "probe")),
                _ms(_med(p1, "sdk_exit")),
                _ratio(_med(p1, "probe") / _med(p1, "sdk_exit")),
                "info",
                "",
            ]
        )
        rows.append(
            [
                "1",
                "… the whole tool `mcp_setup_test_connection` (local catalog, MCPB bundle checked + unpacked, probe)",
                _ms(_med(p1, "tool")),
                _ms(_med(p1, "sdk")),
                _ratio(p1["ratio_tool_sdk"]),
                "info",
                "",
            ]
        )
        if p1.get("inspector"):
            ver = f"Inspector {p1.get('inspector_version')} on Node {p1.get('node_version')}"
            rows.append(
                [
                    "1",
                    f"peer: `npx @modelcontextprotocol/inspector --cli … --method tools/list` ({ver}; {p1['inspector']['n']} rounds), to its JSON / to exit",
                    _ms(_med(p1, "probe")),
                    f"{_ms(_med(p1, 'inspector'))} / {_ms(_med(p1, 'inspector_exit'))}",
                    _ratio(p1["ratio_probe_inspector"]),
                    "info",
                    "",
                ]
            )
        else:
            why = results.get("tools_note") or p1.get("inspector_note") or "not run"
            rows.append(["1", "peer: MCP Inspector CLI", _ms(_med(p1, "probe")), "not run", "—", "info", why])
        r2 = p2["ratio_ignore_normal"]
        rows.append(
            [
                "2",
                "SIGTERM-ignoring stub: `Prober.probe` on it vs on the normal stub (interleaved)",
                _ms(_med(p2, "probe_ignore")),
                _ms(_med(p2, "probe")),
                _ratio(r2),
                "≤ 1.20×",
                _ok(r2 <= 1.20),
            ]
        )
        rows.append(
            [
                "2",
                "… vs the SDK on the same stub, to tools listed / to the end of its `async with`",
                _ms(_med(p2, "probe_ignore")),
                f"{_ms(_med(p2, 'sdk_ignore'))} / {_s(_med(p2, 'sdk_ignore_exit'))}",
                _ratio(p2["ratio_probe_ignore_sdk_ignore"]),
                "info",
                f"background teardown {_s(_med(p2, 'probe_drain'))}; left after drain: {p2['leftover_after_drain']}",
            ]
        )
    else:
        rows.append(["1–2", "test-connect", "—", "—", "—", "≤ 1.10× / ≤ 1.20×", f"not measured: {e}"])

    # 3 --------------------------------------------------------------------------------
    if (e := err("coldstart")) is None:
        c = s["coldstart"]
        t = c["times"]
        r = c["ratio_lowlevel"]
        rows.append(
            [
                "3",
                "cold start: spawn → `initialize` answered, `mcp-setup mcp` vs minimal SDK stdio server (`mcp.server.Server`)",
                _ms(_med(t, "mcp_setup")),
                _ms(_med(t, "min_lowlevel")),
                _ratio(r),
                "≤ 1.50×",
                _ok(r <= 1.5),
            ]
        )
        rows.append(
            [
                "3",
                "… vs minimal `MCPServer` (high-level SDK server)",
                _ms(_med(t, "mcp_setup")),
                _ms(_med(t, "min_mcpserver")),
                _ratio(c["ratio_mcpserver"]),
                "info",
                "",
            ]
        )
        if c.get("ratio_whatif_deferred") is not None:
            rows.append(
                [
                    "3",
                    "… what-if (not the product): `initialize` answered before the core is imported (`bench/whatif_deferred_mcp.py`)",
                    _ms(_med(t, "whatif_deferred")),
                    _ms(_med(t, "min_lowlevel")),
                    _ratio(c["ratio_whatif_deferred"]),
                    "≤ 1.50×",
                    "would meet" if c["ratio_whatif_deferred"] <= 1.5 else "would still miss",
                ]
            )
        elif c.get("whatif_error"):
            rows.append(
                ["3", "… what-if `bench/whatif_deferred_mcp.py`", "—", "—", "—", "info", f"failed: {c['whatif_error']}"]
            )
        if _med(t, "first_call_mcp_setup") is not None:
            rows.append(
                [
                    "3",
                    "… spawn → first tool result (`initialize` + `mcp_setup_list_servers` sent at once): now / what-if",
                    _ms(_med(t, "first_call_mcp_setup")),
                    _ms(_med(t, "first_call_whatif_deferred")),
                    "—",
                    "info",
                    "the deferral moves the core's cost behind the handshake, it does not remove it",
                ]
            )
        rows.append(
            [
                "3",
                "… first start on a fresh data dir (database created) / `python -c pass`",
                _ms(_med(t, "first_start")),
                _ms(_med(t, "python")),
                "—",
                "info",
                "",
            ]
        )
        it, itm = c["importtime_mcp_setup"], c["importtime_min_lowlevel"]
        rows.append(
            [
                "3",
                "… `-X importtime` total (modules imported before serving)",
                f"{it['total_ms']:.0f} ms ({it['modules']} modules)",
                f"{itm['total_ms']:.0f} ms ({itm['modules']} modules)",
                _ratio(it["total_ms"] / itm["total_ms"]),
                "info",
                "breakdown below",
            ]
        )
    else:
        rows.append(["3", "cold start", "—", "—", "—", "≤ 1.50×", f"not measured: {e}"])

    # 4 --------------------------------------------------------------------------------
    if (e := err("search")) is None:
        q = s["search"]
        t = q["times"]
        r = q["ratio_fanout_slowest"]
        slowest = max(_med(t, "official"), _med(t, "smithery"))
        rows.append(
            [
                "4",
                f"search fan-out, both fake registries at {q['latency_s'] * 1000:.0f} ms latency: both vs the slower one alone (paired per round)",
                _ms(_med(t, "fanout")),
                f"{_ms(slowest)} (official {_ms(_med(t, 'official'))}, Smithery {_ms(_med(t, 'smithery'))})",
                _ratio(r),
                "≤ 1.10×",
                _ok(r <= 1.10),
            ]
        )
        hc, tc = q["hub_cached_ms"], q["tool_cached_ms"]
        rows.append(
            [
                "4",
                "repeated search served from the cache: `RegistryHub.search` / the whole `mcp_setup_search` tool (median, p90)",
                f"{hc['median']:.2f} ms / {tc['median']:.2f} ms",
                f"p90 {hc['p90']:.2f} / {tc['p90']:.2f} ms",
                "—",
                "< 5 ms",
                _ok(tc["median"] < 5 and hc["median"] < 5),
            ]
        )
        if "widened" in q:
            w = q["widened"]
            kinds = ("plain", "synonyms", "words")
            worst = max(w[k]["ratio"] for k in kinds)
            rows.append(
                [
                    "4",
                    "official search widened (stems, synonyms, ranked with descriptions) vs one name-only request of "
                    "the API, same query: one word / a word with synonyms / several words (requests "
                    + " / ".join(f"{w[k]['requests']:g}" for k in kinds)
                    + "; paired per round, worst kind)",
                    " / ".join(_ms(w[k]["widened"]["median"]) for k in kinds),
                    " / ".join(_ms(w[k]["baseline"]["median"]) for k in kinds),
                    _ratio(worst),
                    "≤ 1.20×",
                    _ok(worst <= 1.20),
                ]
            )
            t = w["typo"]
            rows.append(
                [
                    "4",
                    "… a typo (nothing by name: two halves of the word asked in one more round)",
                    _ms(t["widened"]["median"]),
                    _ms(t["baseline"]["median"]),
                    _ratio(t["ratio"]),
                    "info",
                    f"+{t['added_ms']:.0f} ms, only when nothing is found",
                ]
            )
    else:
        rows.append(["4", "search fan-out", "—", "—", "—", "≤ 1.10×, < 5 ms", f"not measured: {e}"])

    # 5 --------------------------------------------------------------------------------
    if (e := err("boot")) is None:
        b = s["boot"]
        t = b["times"]
        r = b["ratio_boot_serial"]
        cpu = b.get("cpu_s", {})
        rows.append(
            [
                "5",
                f"boot-spawn of {b['servers']} installed stub servers: `ConnectionManager.start()` vs one at a time (sum)",
                _s(_med(t, "boot")),
                _s(_med(t, "serial_sum")),
                _ratio(r),
                "≤ 0.50×",
                _ok(r <= 0.5),
            ]
        )
        if cpu:
            rows.append(
                [
                    "5",
                    f"… CPU: service {cpu['boot_parent']:.2f} s + stubs {cpu['boot_children']:.2f} s → floor on "
                    f"{b.get('cores')} cores",
                    _s(_med(t, "boot")),
                    f"floor {_s(b.get('cpu_floor_s'))}",
                    _ratio(_med(t, "boot") / b["cpu_floor_s"]) if b.get("cpu_floor_s") else "—",
                    "info",
                    "boot vs its CPU floor",
                ]
            )
        if b.get("slow"):
            sl = b["slow"]
            rows.append(
                [
                    "5",
                    f"… the same with stubs that take {sl['start_delay_s'] * 1000:.0f} ms to start (waiting, not computing)",
                    _s(_med(sl, "boot")),
                    _s(_med(sl, "serial_sum")),
                    _ratio(sl["ratio_boot_serial"]),
                    "≤ 0.50×",
                    _ok(sl["ratio_boot_serial"] <= 0.5),
                ]
            )
    else:
        rows.append(["5", "boot-spawn", "—", "—", "—", "≤ 0.50×", f"not measured: {e}"])

    # 6 --------------------------------------------------------------------------------
    if (e := err("load")) is None:
        ld = s["load"]
        n, ok = ld["setups"], ld.get("succeeded", 0)
        tot = ld.get("total", {})
        clean = (
            ld.get("probe_processes_left") == 0
            and ld.get("scratch_entries_left") == 0
            and ld.get("processes_left_after_stop") == 0
            and ld.get("connected") == n
        )
        rows.append(
            [
                "6",
                f"load: {n} concurrent setups (request secret → answer → test → install) through `/rpc` of `mcp-setup serve`",
                f"{ok}/{n} ok; p50 {_s(tot.get('p50'))}, p95 {_s(tot.get('p95'))}",
                f"wall {_s(ld.get('wall_s'))}",
                "—",
                f"{n}/{n} succeed",
                _ok(ok == n),
            ]
        )
        cpu = ld.get("cpu_s")
        if cpu:
            rows.append(
                [
                    "6",
                    f"… CPU during the load: service {cpu['service']:.1f} s, probes {cpu['probes_reaped']:.1f} s, "
                    f"installed servers {cpu['installed_servers']:.1f} s, bench client {cpu['bench_client']:.1f} s",
                    f"wall {_s(ld.get('wall_s'))}",
                    f"floor {_s(cpu['floor_wall_s'])}",
                    "—",
                    "info",
                    "CPU total / cores",
                ]
            )
        steps = ", ".join(
            f"{k.replace('_', ' ')} {_s(ld[k]['p50'])}/{_s(ld[k]['p95'])}"
            for k in ("request_secret", "answer", "test_connection", "install_and_connect")
            if k in ld
        )
        rows.append(["6", "… per step p50/p95: " + steps, "", "", "", "info", ""])
        rows.append(
            [
                "6",
                "… left behind: probe processes / scratch entries / processes after SIGINT; installed servers connected",
                f"{ld.get('probe_processes_left')} / {ld.get('scratch_entries_left')} / {ld.get('processes_left_after_stop')}; "
                f"{ld.get('connected')}/{n} connected",
                f"exit code {ld.get('exit_code')}",
                "—",
                "nothing left",
                _ok(clean),
            ]
        )
    else:
        rows.append(["6", "load through `/rpc`", "—", "—", "—", "50/50 succeed", f"not measured: {e}"])

    # 7 --------------------------------------------------------------------------------
    if (e := err("memory")) is None:
        m = s["memory"]
        rows.append(
            [
                "7",
                "memory (VmRSS, service process only): `mcp-setup serve` idle / with "
                f"{m['servers']} connected servers ({m.get('connected')} connected)",
                f"{m['serve_idle_kib'] / 1024:.0f} MiB / {m['serve_20_kib'] / 1024:.0f} MiB",
                f"children: {m.get('children')} stubs, {m.get('children_total_kib', 0) / 1024:.0f} MiB total (not counted)",
                "—",
                "report",
                "",
            ]
        )
        base = f"minimal SDK server {m['min_sdk_idle_kib'] / 1024:.0f} MiB" if m.get("min_sdk_idle_kib") else ""
        rows.append(
            [
                "7",
                "… `mcp-setup mcp` idle after `initialize`",
                f"{m['mcp_idle_kib'] / 1024:.0f} MiB",
                base,
                _ratio(m["mcp_idle_kib"] / m["min_sdk_idle_kib"]) if m.get("min_sdk_idle_kib") else "—",
                "report",
                "",
            ]
        )
        if m.get("mcp_listed_kib") and m.get("min_sdk_idle_kib"):
            r = m["mcp_listed_kib"] / m["min_sdk_idle_kib"]
            rows.append(
                [
                    "7",
                    f"… `mcp-setup mcp` on a data dir with 3 servers, idle after `initialize` + `tools/list` ({m.get('mcp_listed_tools')} tools; core not loaded)",
                    f"{m['mcp_listed_kib'] / 1024:.0f} MiB",
                    base,
                    _ratio(r),
                    "≤ 1.30×",
                    _ok(r <= 1.3),
                ]
            )
            rows.append(
                [
                    "7",
                    "… the same after its first tool call (`mcp_setup_list_servers`: the core loaded; no server started)",
                    f"{m['mcp_after_call_kib'] / 1024:.0f} MiB",
                    base,
                    _ratio(m["mcp_after_call_kib"] / m["min_sdk_idle_kib"]),
                    "info",
                    f"servers started: {m.get('mcp_after_call_children')}",
                ]
            )
    else:
        rows.append(["7", "memory", "—", "—", "—", "report", f"not measured: {e}"])

    # 8–10 (#17) ----------------------------------------------------------------------
    if (e := err("adopt")) is None:
        a = s["adopt"]
        t = a["times"]
        r = a["ratio_install_test"]
        starts = a["starts_per_setup"]
        rows.append(
            [
                "8",
                f"install right after a passing test (adopts the tested process) ÷ that test, same stub, paired per round ({a['rounds']} rounds)",
                _ms(_med(t, "adopt_install")),
                _ms(_med(t, "adopt_test")),
                _ratio(r),
                "≤ 0.20×",
                _ok(r <= 0.2),
            ]
        )
        rows.append(
            [
                "8",
                "… server starts per setup (test + install, pid file): adopting / with adoption off",
                f"{starts['adopt']:.0f}",
                f"{starts['fresh']:.0f}",
                "—",
                "1",
                _ok(starts["adopt"] == 1),
            ]
        )
        if a.get("slow"):
            sl = a["slow"]
            rows.append(
                [
                    "8",
                    f"… the same on a stub that takes 200 ms to answer its first request (like a launcher; {sl['test']['n']} rounds)",
                    _ms(_med(sl, "install")),
                    _ms(_med(sl, "test")),
                    _ratio(sl["ratio_install_test"]),
                    "≤ 0.20×",
                    _ok(sl["ratio_install_test"] <= 0.2),
                ]
            )
        rows.append(
            [
                "8",
                "… with adoption off (`MCP_SETUP_ADOPT_TESTED_SERVERS=false`): install ÷ test",
                _ms(_med(t, "fresh_install")),
                _ms(_med(t, "fresh_test")),
                _ratio(a["ratio_fresh_install_test"]),
                "info",
                "",
            ]
        )
    else:
        rows.append(["8", "install after a test", "—", "—", "—", "≤ 0.20×", f"not measured: {e}"])
    if (e := err("gateway")) is None:
        g = s["gateway"]
        c, li = g["call"], g["list"]
        tc = c["times"]

        def us(x: float | None) -> str:
            return "—" if x is None else f"{x * 1000:.2f} ms"

        rows.append(
            [
                "9",
                f"proxied `tools/call` through `mcp-setup mcp` vs the same call through the minimal SDK proxy (`bench/minimal_proxy.py`: the floor of any proxy built on the SDK), in the same rounds ({tc['gateway']['n']} interleaved calls; min–max {us(tc['gateway']['min'])}–{us(tc['gateway']['max'])} vs {us(tc['proxy']['min'])}–{us(tc['proxy']['max'])})",
                us(_med(tc, "gateway")),
                us(_med(tc, "proxy")),
                _ratio(c["ratio_gateway_proxy"]),
                "≤ 1.0×",
                _ok(c["ratio_gateway_proxy"] <= 1.0)
                + f" (paired per round {_ratio(c['per_round_ratio_gateway_proxy'])})",
            ]
        )
        rows.append(
            [
                "9",
                "… both vs the SDK client straight to a stub, same rounds: `mcp-setup mcp` ÷ direct (the minimal proxy ÷ direct in the last column)",
                us(_med(tc, "gateway")),
                us(_med(tc, "direct")),
                _ratio(c["ratio"]),
                "info",
                f"minimal proxy ÷ direct {_ratio(c['ratio_proxy_direct'])}",
            ]
        )
        tl = li["times"]
        rows.append(
            [
                "9",
                f"`tools/list` of a fresh `mcp-setup mcp` (spawn → answer) with {g['servers']} installed servers ({li['tools']['with']} tools) vs none ({li['tools']['none']})",
                _ms(_med(tl, "with")),
                _ms(_med(tl, "none")),
                _ratio(li["ratio"]),
                "≤ 1.10×",
                _ok(li["ratio"] <= 1.1 and li["servers_spawned"] == 0) + f" (servers spawned: {li['servers_spawned']})",
            ]
        )
    else:
        rows.append(["9", "gateway", "—", "—", "—", "≤ 1.0× / ≤ 1.10×", f"not measured: {e}"])
    for section, what, done, missing in (
        (
            "prefetch",
            "`server-everything` {version}, cold private npm cache",
            "… the prefetch itself (prompt opened → npx's entry made)",
            "prefetch",
        ),
        (
            "prefetch_pypi",
            "`mcp-server-time` {version} (PyPI, uvx), cold private uv cache",
            "… the PyPI prefetch itself (prompt opened → the wheels in uv's cache)",
            "prefetch (PyPI)",
        ),
    ):
        if (e := err(section)) is not None:
            rows.append(["10", missing, "—", "—", "—", "≤ 0.30×", f"not measured: {e}"])
            continue
        f = s[section]
        t = f["times"]
        rows.append(
            [
                "10",
                what.format(version=f["version"])
                + f": secret answered ({f['typing_s']:.0f} s after the prompt opened) → tools listed, with prefetch vs without ({t['prefetch']['n']} rounds each; min–max {_s(t['prefetch']['min'])}–{_s(t['prefetch']['max'])} vs {_s(t['none']['min'])}–{_s(t['none']['max'])})",
                _s(_med(t, "prefetch")),
                _s(_med(t, "none")),
                _ratio(f["ratio"]),
                "≤ 0.30×",
                _ok(f["ratio"] <= 0.3),
            ]
        )
        rows.append(["10", done, _s(_med(f, "prefetch_done_s")), f"typing {f['typing_s']:.0f} s", "—", "info", ""])

    if (e := err("redact")) is None:
        rd = s["redact"]
        t = rd["times"]
        red, js = _med(t, "redact"), _med(t, "json")
        rows.append(
            [
                "11",
                f"redactor (#24 item 4): `Redactor.redact_obj` on a 1 MiB tool result with {rd['secrets']} stored secrets (every form of each) vs `json.dumps` of it ({t['redact']['n']} interleaved rounds; min–max {_ms(t['redact']['min'])}–{_ms(t['redact']['max'])})",
                _ms(red),
                _ms(js),
                _ratio(red / js if red and js else None),
                "< 20 ms",
                _ok(red is not None and red < 0.020),
            ]
        )
        rows.append(
            [
                "11",
                "… the same text with one secret planted, spaced out (located and replaced) / the automaton built after the secrets changed",
                _ms(_med(t, "planted")),
                _ms(rd["build_s"]),
                "—",
                "info",
                "",
            ]
        )
    else:
        rows.append(["11", "redactor", "—", "—", "—", "< 20 ms", f"not measured: {e}"])
    # 12 (#23) -------------------------------------------------------------------------
    if (e := err("sandbox")) is None:
        b = s["sandbox"]
        t = b["times"]
        for kind, label in (
            ("bwrap", "bubblewrap (`auto` here)"),
            ("landlock", "the Landlock launcher (`auto`'s fallback)"),
        ):
            if kind not in t:
                rows.append(
                    [
                        "12",
                        f"a stub's start in {label}",
                        "—",
                        "—",
                        "—",
                        "≤ 1.15× or ≤ 50 ms added",
                        "not measured: " + str(b.get("unavailable", {}).get(kind, "unavailable")),
                    ]
                )
                continue
            r, added = b[f"ratio_{kind}"], b[f"added_{kind}_s"]
            rows.append(
                [
                    "12",
                    f"a stub's start (probe to tools listed) in {label} vs `MCP_SETUP_SANDBOX=off`, interleaved ({b['rounds']} rounds; added {added * 1000:.0f} ms)",
                    _ms(_med(t, kind)),
                    _ms(_med(t, "off")),
                    _ratio(r),
                    "≤ 1.15× or ≤ 50 ms added",
                    _ok(r <= 1.15 or added <= 0.05),
                ]
            )
    else:
        rows.append(["12", "sandboxed start", "—", "—", "—", "≤ 1.15× or ≤ 50 ms added", f"not measured: {e}"])

    # 13 (#28 item 2) ------------------------------------------------------------------
    if (e := err("team")) is None:
        tm = s["team"]
        t = tm["times"]
        ne, pe = _med(t, "notify_enable"), _med(t, "polling_enable")
        rows.append(
            [
                "13",
                f"team (#28): a server's tools appearing on replica A (`servers.enable` over `/rpc`, as an install) → `tools/list_changed` at an `/mcp` client of replica B, one PostgreSQL: `LISTEN/NOTIFY` vs the polling only (`MCP_SETUP_LISTEN_NOTIFY=false`), two pairs of `serve` replicas, interleaved ({t['notify_enable']['n']} rounds each; p90 {_ms(t['notify_enable']['p90'])} vs {_ms(t['polling_enable']['p90'])})",
                _ms(ne),
                _ms(pe),
                _ratio(tm["ratio"]),
                "≤ 100 ms",
                _ok(ne is not None and ne <= 0.100),
            ]
        )
        rows.append(
            [
                "13",
                "… a disable (B stops the server before it tells its clients), NOTIFY vs polling only",
                _ms(_med(t, "notify_disable")),
                _ms(_med(t, "polling_disable")),
                "—",
                "info",
                "",
            ]
        )
    else:
        rows.append(
            [
                "13",
                "team: a change on replica A seen by a client of replica B",
                "—",
                "—",
                "—",
                "≤ 100 ms",
                f"not measured: {e}",
            ]
        )

    # 14 (#25 item 9) ----------------------------------------------------------------
    if (e := err("cli")) is None:
        c = s["cli"]
        t = c["times"]
        li = _med(t, "list")
        rows.append(
            [
                "14",
                f"`mcp-setup list` ({c['servers']} installed servers, SQLite), spawn → exit, vs `python -c pass` ({t['list']['n']} interleaved rounds; min–max {_ms(t['list']['min'])}–{_ms(t['list']['max'])})",
                _ms(li),
                _ms(_med(t, "pass")),
                _ratio(c["ratio"]),
                "≤ 0.3 s",
                _ok(li is not None and li <= 0.3),
            ]
        )
        rows.append(
            [
                "14",
                "… `mcp-setup show SLUG` (loads the launch spec's model for its sandbox lines) / `mcp-setup --help`",
                _ms(_med(t, "show")),
                _ms(_med(t, "help")),
                "—",
                "info",
                "",
            ]
        )
        if "tools" in t:
            rows.append(
                [
                    "14",
                    "… `mcp-setup tools` (the tool registry; pydantic settings for config.toml) / `mcp-setup audit`",
                    _ms(_med(t, "tools")),
                    _ms(_med(t, "audit")),
                    "—",
                    "info",
                    "",
                ]
            )
    else:
        rows.append(["14", "`mcp-setup list`", "—", "—", "—", "≤ 0.3 s", f"not measured: {e}"])
    # 15: a server's own network namespace ----------------------------------------------
    if (e := err("netns")) is None:
        n = s["netns"]
        st, rq = n["start"], n["request"]
        if "unavailable" in st:
            rows.append(
                [
                    "15",
                    "a start in its own network namespace",
                    "—",
                    "—",
                    "—",
                    "≤ 1.15× or ≤ 50 ms added",
                    "not measured: " + st["unavailable"],
                ]
            )
        else:
            r, added = st["ratio_netns"], st["added_netns_s"]
            rows.append(
                [
                    "15",
                    f"`/bin/true` started in the sandbox in its own network namespace (bootstrap, socket handed to the proxy) vs `--share-net`, interleaved ({st['rounds']} rounds; added {added * 1000:.0f} ms)",
                    _ms(_med(st["times"], "netns")),
                    _ms(_med(st["times"], "shared")),
                    _ratio(r),
                    "≤ 1.15× or ≤ 50 ms added",
                    _ok(r <= 1.15 or added <= 0.05),
                ]
            )
            rows.append(
                [
                    "15",
                    f"… the namespace alone (`--unshare-net`, no bootstrap; added {st['added_netns_only_s'] * 1000:.1f} ms)",
                    _ms(_med(st["times"], "netns_only")),
                    _ms(_med(st["times"], "shared")),
                    _ratio(st["ratio_netns_only"]),
                    "info",
                    "",
                ]
            )
        rows.append(
            [
                "15",
                f"a new HTTPS request (TCP, TLS, GET) to a local TLS server through the proxy (`CONNECT`) vs direct, interleaved ({rq['rounds']} rounds; added {rq['added_s'] * 1000:.2f} ms)",
                _ms(_med(rq["times"], "proxied")),
                _ms(_med(rq["times"], "direct")),
                _ratio(rq["ratio"]),
                "info",
                "",
            ]
        )
        dl = n.get("download", {})
        if "unavailable" in dl or not dl:
            rows.append(
                [
                    "15",
                    "the download phase in the sandbox",
                    "—",
                    "—",
                    "—",
                    "info",
                    "not measured: " + str(dl.get("unavailable", "not run")),
                ]
            )
        else:
            rows.append(
                [
                    "15",
                    f"the download phase (`npm exec` from a registry on loopback, cold npm cache) in bubblewrap with its network namespace and proxy, the registry its only destination, vs `MCP_SETUP_SANDBOX=off`, interleaved ({dl['rounds']} rounds; added {dl['added_s'] * 1000:.0f} ms)",
                    _ms(_med(dl["times"], "bwrap")),
                    _ms(_med(dl["times"], "off")),
                    _ratio(dl["ratio"]),
                    "info",
                    "",
                ]
            )
    else:
        rows.append(
            [
                "15",
                "a start in its own network namespace",
                "—",
                "—",
                "—",
                "≤ 1.15× or ≤ 50 ms added",
                f"not measured: {e}",
            ]
        )

    # 16 (#38): SIGINT to exit with a call in flight -----------------------------------------
    if (e := err("interrupt")) is None:
        i = s["interrupt"]
        t = i["times"]
        mc = _med(t, "mcp")
        clean = i["codes"]["mcp"] == [130] and i["left"] == 0 and i["tracebacks"] == 0
        rows.append(
            [
                "16",
                f"SIGINT → exit of `mcp-setup mcp` with a call in flight at an installed (sandboxed) server vs a minimal SDK stdio server, idle, SIGINT + stdin closed (SIGINT alone never ends it) ({t['mcp']['n']} interleaved rounds; min–max {_ms(t['mcp']['min'])}–{_ms(t['mcp']['max'])})",
                _ms(mc),
                _ms(_med(t, "sdk")),
                _ratio(i["ratio"]),
                "≤ 100 ms",
                _ok(mc is not None and mc <= 0.1 and clean),
            ]
        )
        rows.append(
            [
                "16",
                "… exit codes (`mcp-setup mcp` / SDK server); processes left; tracebacks in its log",
                ", ".join(map(str, i["codes"]["mcp"])),
                ", ".join(map(str, i["codes"]["sdk"])),
                "—",
                "130; 0; 0",
                f"{i['left']} left; {i['tracebacks']} tracebacks",
            ]
        )
    else:
        rows.append(["16", "SIGINT → exit of `mcp-setup mcp`", "—", "—", "—", "≤ 100 ms", f"not measured: {e}"])

    # 17-19: what each installed server costs ----------------------------------------------
    if (e := err("costs")) is None:
        c = s["costs"]
        i, b, f = c["idle"], c["budget"], c["find"]
        w = c.get("wrapper", {"unavailable": "not measured"})
        if "unavailable" in w:
            rows.append(
                [
                    "17",
                    "memory per called npm server, started without npx vs through it",
                    "—",
                    "—",
                    "—",
                    "≤ 0.60×",
                    f"not measured: {w['unavailable']}",
                ]
            )
        else:
            d, n = w["direct"], w["npx"]
            rows.append(
                [
                    "17",
                    f"memory (PSS) of every process below `mcp-setup mcp` per called npm server ({w['servers']} servers of the "
                    f"tests' own package from a registry on loopback, sandboxed, each called once): started from what npx "
                    f"installed (node on the package's bin; {d['processes']} processes, {d['kib'] / 1024:.0f} MiB in all) vs "
                    f"through npx (`npm exec` and `sh` beside each; {n['processes']} processes, {n['kib'] / 1024:.0f} MiB "
                    f"in all); first call {_ms(d['first_call_s'])} vs {_ms(n['first_call_s'])}",
                    f"{d['per_server_kib'] / 1024:.0f} MiB",
                    f"{n['per_server_kib'] / 1024:.0f} MiB",
                    _ratio(w["ratio"]),
                    "≤ 0.60×",
                    _ok(w["ratio"] <= 0.60),
                ]
            )
        rows.append(
            [
                "17",
                f"`mcp-setup mcp` and its children after {i['servers']} stub servers were each called once and "
                f"left idle past `MCP_SETUP_IDLE_STOP_SECONDS` ({i['after_idle_children']} still running; "
                f"{i['running_kib'] / 1024:.0f} MiB while all {i['running_children']} ran) vs nothing installed",
                f"{i['after_idle_kib'] / 1024:.0f} MiB",
                f"{i['nothing_kib'] / 1024:.0f} MiB",
                _ratio(i["ratio_after_idle"]),
                "≤ 1.10×",
                _ok(i["ratio_after_idle"] <= 1.10),
            ]
        )
        fc = c["first"]
        rows.append(
            [
                "17",
                f"… a stub's first call after its idle stop vs its first call ever (a cold start: spawn in the sandbox, "
                f"initialize, tools listed and pinned, the call), same face, {fc['rounds']} interleaved rounds "
                f"(min–max {_ms(fc['after_idle']['min'])}–{_ms(fc['after_idle']['max'])} vs "
                f"{_ms(fc['cold']['min'])}–{_ms(fc['cold']['max'])})",
                _ms(fc["after_idle"]["median"]),
                _ms(fc["cold"]["median"]),
                _ratio(fc["ratio"]),
                "≤ 1.10×",
                _ok(fc["ratio"] <= 1.10) + f" (per stub {_ratio(fc['per_server'])})",
            ]
        )
        rows.append(
            [
                "18",
                f"tokens of `tools/list` with 20 servers × 20 tools under the default budget ({b['budget']:,}) vs listing all",
                f"{b['listed_tokens']:,}",
                f"{b['all_tokens']:,}",
                _ratio(b["ratio"]),
                f"≤ {b['budget']:,} tokens",
                _ok(b["listed_tokens"] <= b["budget"]),
            ]
        )
        rows.append(
            [
                "19",
                f"`mcp_setup_find_tools`: the right tool in the top 3, over {f['tasks']} task phrases and 7 real servers' tools",
                f"{f['rate']:.0%}",
                "—",
                "—",
                "≥ 90%",
                _ok(f["rate"] >= 0.90),
            ]
        )
    else:
        rows.append(
            [
                "17",
                "what each installed server costs (idle stop, budget, find)",
                "—",
                "—",
                "—",
                "",
                f"not measured: {e}",
            ]
        )

    # 20: a commit to the SQLite store -------------------------------------------------------
    if (e := err("store")) is None:
        st = s["store"]
        pc = st["per_commit"]

        def ms1(x: float) -> str:
            return f"{x * 1000:.1f} ms"

        rows.append(
            [
                "20",
                f"a commit to the SQLite store (install, disable, enable, remove of {st['servers']} servers: "
                f"{st['commits_per_round']} commits with their audit rows and the change counter), as shipped "
                f"(`journal_mode=WAL`, `synchronous=NORMAL`) vs the rollback journal and full sync it had before, "
                f"same run, interleaved ({st['rounds']} rounds; min–max {ms1(pc['shipped']['min'])}–"
                f"{ms1(pc['shipped']['max'])} vs {ms1(pc['previous']['min'])}–{ms1(pc['previous']['max'])}; "
                f"{st['filesystem']})",
                ms1(pc["shipped"]["median"]),
                ms1(pc["previous"]["median"]),
                _ratio(st["ratio"]),
                "info",
                "",
            ]
        )
        rows.append(
            [
                "20",
                "… the write-ahead log with a sync at every commit (`synchronous=FULL`) vs the same baseline",
                ms1(pc["wal_full"]["median"]),
                ms1(pc["previous"]["median"]),
                _ratio(pc["wal_full"]["median"] / pc["previous"]["median"]),
                "info",
                "",
            ]
        )
    else:
        rows.append(["20", "a commit to the SQLite store", "—", "—", "—", "info", f"not measured: {e}"])

    head = ["#", "measurement", "mcp-setup", "baseline", "ratio", "target", "result"]
    la = results.get("loadavg_start")
    lines = [
        f"Run: {results.get('when')} · {results.get('machine')} · total {results.get('total_seconds', 0):.0f} s"
        + (f" · load average at start {la[0]:.1f}" if la else "")
        + (f" · mcp {results['versions']['mcp']}" if results.get("versions") else "")
        + (" · **quick run**" if results.get("quick") else ""),
        "",
        "| " + " | ".join(head) + " |",
        "| " + " | ".join("---" for _ in head) + " |",
    ]
    for row in rows:
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    lines.append("")
    lines.append(
        "Medians unless marked. Section run times: "
        + ", ".join(f"{k} {v.get('seconds', 0):.0f} s" for k, v in s.items())
        + f"; stray processes at the end: {results.get('stray_processes_killed', 0)}."
    )

    if err("coldstart") is None:
        c = s["coldstart"]
        it, itm = c["importtime_mcp_setup"], c["importtime_min_lowlevel"]
        lines += [
            "",
            "`-X importtime`, self time by top-level package (one start each):",
            "",
            "| package | `mcp-setup mcp` | minimal SDK server |",
            "| --- | --- | --- |",
        ]
        base = dict(itm["self_by_package_ms"])
        for pkg, ms in it["self_by_package_ms"][:12]:
            other = base.get(pkg)
            lines.append(f"| `{pkg}` | {ms:.0f} ms | {'—' if other is None else f'{other:.0f} ms'} |")
        lines += [
            "",
            "Largest cumulative imports of `mcp-setup mcp`: "
            + ", ".join(f"`{n}` {v:.0f} ms" for n, v in it["largest_cumulative_ms"][:12])
            + ".",
        ]
    lines += notes
    return "\n".join(lines)


def write_readme(path: Path, table: str) -> None:
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{START}\n{END}\n"
    if START not in text or END not in text:
        text = text.rstrip() + f"\n\n## Latest results\n\n{START}\n{END}\n"
    new = re.sub(re.escape(START) + r".*?" + re.escape(END), lambda _: f"{START}\n{table}\n{END}", text, flags=re.S)
    path.write_text(new)
