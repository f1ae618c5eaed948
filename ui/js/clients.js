// The AI clients: every client mcp-setup supports, found on this computer or not, its state
// (connected to this mcp-setup or not) and a Connect button that shows the exact change (the
// diff `mcp-setup client connect --dry-run` prints) and writes it only when confirmed (backup,
// idempotent; a file mcp-setup cannot merge is left alone and the entry to paste is shown); the
// gateway's /mcp address for clients that take one. Drawn in the home page's "AI clients"
// section, always there, and after an install as "Use it in your AI client" with the tools as a
// client names them. Same code as the CLI: /rpc clients.*.

import { $, el } from "./dom.js";
import { rpc } from "./api.js";

var NAMES = { "claude-desktop": "Claude Desktop", "claude-code": "Claude Code", cursor: "Cursor", vscode: "VS Code",
              windsurf: "Windsurf", zed: "Zed", gemini: "Gemini CLI", codex: "Codex" };

function label(client) { return NAMES[client] || client; }

function stateWords(row) {
  if (row.problem) return "mcp-setup cannot read its settings file";
  if (row.up_to_date) return "Connected";
  if (row.connected) return "Connected (an older entry: Connect updates it)";
  if (!row.found) return "Not found on this computer";
  return "Not connected";
}

// Every part that lists the clients (the home section, an install's card): a change made in
// one is drawn again in all of them.
var parts = [];

function reloadAll(notice, noticeFor) {
  parts = parts.filter(function (part) { return part.card.isConnected; });
  parts.forEach(function (part) { load(part, part.card === notice.owner ? notice.line : null, noticeFor); });
}

function clientItem(row, refresh) {
  var state = el("span", { class: "client-state" + (row.up_to_date ? " ok" : "") + (row.found || row.connected ? "" : " absent"),
                           text: stateWords(row) });
  var panel = el("div", { class: "client-change", hidden: true });
  // Quiet where nothing is needed (connected) or nothing is found (a client to install first).
  var button = el("button", { type: "button", class: row.up_to_date || !(row.found || row.connected) ? "quiet" : "primary",
                              "data-client": row.client, text: row.up_to_date ? "Check again" : "Connect…" });
  // Over HTTP: the client reaches this page's /mcp with a key of its own (Claude Desktop's file takes none).
  var http = row.client === "claude-desktop" ? null : el("button", {
    type: "button", class: "quiet", "data-client-http": row.client, text: "Connect over HTTP…" });
  var item = el("li", { class: "client", "data-client": row.client, "data-found": String(!!row.found) }, [
    el("div", { class: "client-head" }, [el("strong", { text: label(row.client) }), " ", state, button].concat(http ? [" ", http] : [])),
    el("div", { class: "small muted client-path" }, [el("code", { text: row.path })]),
    panel
  ]);
  function ask(overHttp, pressed) {
    pressed.disabled = true;
    rpc("clients.connect", { client: row.client, apply: false, http: overHttp }).then(function (plan) {
      showPlan(panel, plan, refresh);
    }, function (failure) {
      showPlan(panel, { problem: failure.message }, refresh);
    }).then(function () { pressed.disabled = false; });
  }
  button.addEventListener("click", function () { ask(false, button); });
  if (http) http.addEventListener("click", function () { ask(true, http); });
  return item;
}

function showPlan(panel, plan, refresh) {
  panel.textContent = "";
  panel.hidden = false;
  if (plan.snippet !== undefined) {  // a file mcp-setup will not rewrite: the entry to paste
    panel.appendChild(el("p", { class: "error", text: plan.problem }));
    panel.appendChild(el("p", { class: "small", text: plan.paste_where }));
    panel.appendChild(el("pre", { class: "diff", text: plan.snippet }));
    return;
  }
  if (plan.problem) { panel.appendChild(el("p", { class: "error", role: "alert", text: plan.problem })); return; }
  if (!plan.changed) { panel.appendChild(el("p", { class: "small", text: plan.message })); return; }
  var apply = el("button", { type: "button", class: "primary", text: "Apply this change" });
  var cancel = el("button", { type: "button", class: "quiet", text: "Cancel" });
  panel.appendChild(el("p", { class: "small", text: "This is the change to " + plan.path + " (other entries stay as they are; the old file is kept as a backup):" }));
  panel.appendChild(el("pre", { class: "diff", tabIndex: 0, "aria-label": "The change, as a diff", text: plan.diff }));
  panel.appendChild(el("div", { class: "row" }, [apply, cancel]));
  cancel.addEventListener("click", function () { panel.hidden = true; panel.textContent = ""; });
  apply.addEventListener("click", function () {
    apply.disabled = cancel.disabled = true;
    rpc("clients.connect", { client: plan.client, apply: true, http: !!plan.http }).then(function (done) {
      refresh(el("p", { class: "small ok-line", role: "status", text: "✓ " + done.message }), plan.client);
    }, function (failure) {
      panel.appendChild(el("p", { class: "error", role: "alert", text: failure.message }));
      apply.disabled = cancel.disabled = false;
    });
  });
  apply.focus();
}

// The clients found here first, then the others: each can be connected (a client installed
// later finds its entry waiting).
function render(part, result, notice, noticeFor) {
  var card = part.card;
  var body = card.querySelector(".clients-body");
  body.textContent = "";
  var rows = result.clients || [];
  var here = function (r) { return r.found || r.connected; };
  var ordered = rows.filter(here).concat(rows.filter(function (r) { return !here(r); }));
  var list = el("ul", { class: "clients", "aria-label": "AI clients" });
  ordered.forEach(function (row) {
    var item = clientItem(row, function (message, client) { reloadAll({ owner: card, line: message }, client); });
    if (notice && row.client === noticeFor) item.appendChild(notice);
    list.appendChild(item);
  });
  if (!rows.some(here)) body.appendChild(el("p", { class: "muted small", text: "No AI client was found on this computer. " +
    "You can still connect one: mcp-setup writes its settings file, ready for when you install it." }));
  body.appendChild(list);
  body.appendChild(el("p", { class: "small" }, [
    "Clients that take an address: ", el("code", { text: window.location.origin + "/mcp" }),
    " while this page runs. Connect over HTTP gives the client a key of its own, which can use your servers and ",
    "approves nothing (in a terminal: ", el("code", { text: "mcp-setup client connect CLIENT --http" }),
    "; for another client: ", el("code", { text: "mcp-setup token create NAME --client" }),
    "). The key in this page's link opens only this page."
  ]));
  var tools = part.tools ? result.tools || [] : [];
  if (tools.length) {
    body.appendChild(el("p", { class: "small", text: "The client lists these tools under these names:" }));
    body.appendChild(el("ul", { class: "client-tools" }, tools.map(function (t) {
      return el("li", null, [el("code", { class: "tool-name", text: t.name }), " — " + t.server]);
    })));
  }
}

function load(part, notice, noticeFor) {
  return rpc("clients.list", {}).then(function (result) { render(part, result, notice, noticeFor); }, function (failure) {
    var body = part.card.querySelector(".clients-body");
    body.textContent = "";
    body.appendChild(el("p", { class: "error", role: "alert", text: failure.message }));
  });
}

export function clientsCard() {
  var card = el("li", { class: "clients-card", "aria-label": "Use it in your AI client" }, [
    el("h4", { text: "Use it in your AI client" }),
    el("p", { class: "small", text: "Connect a client once: it then gets the tools of every server installed here, " +
              "through mcp-setup. Restart the client after connecting." }),
    el("div", { class: "clients-body" }, [el("p", { class: "muted small", text: "Looking for AI clients on this computer…" })])
  ]);
  var part = { card: card, tools: true };
  parts.push(part);
  load(part);
  return card;
}

// The home page's "AI clients" section: always there, whatever is installed and however.
export function initClientsSection() {
  var part = { card: $("clients-section"), tools: false };
  parts.push(part);
  load(part);
}
