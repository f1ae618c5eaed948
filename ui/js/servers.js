// The installed-servers list: status badge, who installed it, its tools, Reconnect, and Remove
// (with its confirm dialog). Also the tool list, which the thread shows too.

import { $, el, showError } from "./dom.js";
import { rpc } from "./api.js";
import { detailsPart } from "./server_card.js";
import { networkPart } from "./server_network.js";
import { tryPart } from "./try_tool.js";

// "stopped": not running now; the gateway starts it on its next use (after an idle stop, or not yet used).
var STATUS_WORDS = { connected: "Connected", connecting: "Starting…", failed: "Not working", stopped: "Idle (starts on next use)",
                     disabled: "Disabled", tools_changed: "Tools changed: review", needs_sign_in: "Sign-in expired" };

function capitalized(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

// server: a connected installed server's card, whose tools can be tried from the page (try_tool.js).
export function toolList(tools, server) {
  return el("ul", { class: "tool-list" }, tools.map(function (tool) {
    return el("li", null, [
      el("span", { class: "tool-name", text: tool.name || "?" }),
      tool.description ? " — " + tool.description : "",
      server ? tryPart(server, tool) : null
    ]);
  }));
}

// The card's choice of tools (an install keeps every tool its test listed): one ticked box per
// tool offered to the assistant, an unticked one per tool left out; a change is stored at once
// (/rpc servers.tool_shown) and every gateway lists the server's tools again.
function toolChoice(server, tools, itemError) {
  var names = tools.map(function (t) { return t.name; }).concat(server.left_out_by_user || []);
  var left = server.left_out_by_user || [];
  return el("ul", { class: "tool-choice" }, names.map(function (toolName) {
    var box = el("input", { type: "checkbox", "data-tool": toolName, "data-focus-key": "tool:" + server.server_id + ":" + toolName,
                            "aria-label": "Offer " + toolName + " to your assistant" });
    box.checked = left.indexOf(toolName) < 0;
    box.addEventListener("change", function () {
      box.disabled = true;
      rpc("servers.tool_shown", { server_id: server.server_id, tool: toolName, shown: box.checked }).then(function () {
        loadServersSoon();
      }, function (failure) {
        box.checked = !box.checked;
        box.disabled = false;
        showError(itemError, failure.message);
      });
    });
    return el("li", null, [el("label", { class: "check" }, [box, " ", el("code", { text: toolName })])]);
  }));
}

function renderServers(servers) {
  var list = $("servers");
  var active = document.activeElement;
  var focusKey = active && list.contains(active) ? active.getAttribute("data-focus-key") : null;
  var open = {};
  var openMore = {};
  Array.prototype.forEach.call(list.querySelectorAll("details.tools[open]"), function (d) { open[d.dataset.server] = true; });
  Array.prototype.forEach.call(list.querySelectorAll("details.server-more[open]"), function (d) { openMore[d.dataset.slug] = true; });
  var openPick = {};
  Array.prototype.forEach.call(list.querySelectorAll("details.tool-pick[open]"), function (d) { openPick[d.dataset.server] = true; });
  list.textContent = "";
  $("servers-empty").hidden = servers.length > 0;
  servers.forEach(function (server) {
    var name = server.qualified_name || server.server_id;
    var tools = server.tools || [];
    var status = server.status || "stopped";
    var itemError = el("p", { class: "error", role: "alert", hidden: true });
    var when = server.installed_at ? new Date(server.installed_at) : null;
    var details = null;
    if (tools.length) {
      details = el("details", { class: "tools", "data-server": server.server_id }, [
        el("summary", { text: tools.length === 1 ? "1 tool" : tools.length + " tools", "data-focus-key": "tools:" + server.server_id }),
        toolList(tools, status === "connected" ? server : null)
      ]);
      if (open[server.server_id]) details.open = true;
    }
    var pick = null;  // which of its tools the assistant gets (all, after an install)
    if (tools.length || (server.left_out_by_user || []).length) {
      pick = el("details", { class: "tool-pick", "data-server": server.server_id }, [
        el("summary", { text: "Choose the tools your assistant gets", "data-focus-key": "pick:" + server.server_id }),
        el("p", { class: "small muted", text: "Untick a tool to leave it out: your assistant neither sees nor uses it. " +
          "Each costs tokens in every conversation." }),
        toolChoice(server, tools, itemError)
      ]);
      if (openPick[server.server_id]) pick.open = true;
    }
    var reconnect = el("button", { type: "button", text: "Reconnect", "aria-label": "Reconnect " + name,
                                   "data-focus-key": "reconnect:" + server.server_id });
    var remove = el("button", { type: "button", class: "danger", text: "Remove", "aria-label": "Remove " + name,
                                "data-focus-key": "remove:" + server.server_id });
    // Enabled: its tools are offered to agents. Disabled: it keeps its settings but is stopped.
    var enabled = server.enabled !== false;
    var toggle = el("input", { type: "checkbox", class: "enable-toggle", role: "switch",
                               "aria-label": "Offer " + name + "'s tools to agents",
                               "data-focus-key": "enable:" + server.server_id });
    toggle.checked = enabled;
    toggle.addEventListener("change", function () {
      showError(itemError, "");
      var method = toggle.checked ? "servers.enable" : "servers.disable";
      rpc(method, { server_id: server.server_id }).then(loadServers, function (err) {
        toggle.checked = !toggle.checked;
        showError(itemError, "Could not " + (method === "servers.enable" ? "enable" : "disable") + " it. " + err.message);
      });
    });
    var toggleLabel = el("label", { class: "enable" }, [toggle, " Enabled"]);
    // Kept running: never stopped when idle (by default an unused server stops and starts on its next use).
    var keep = el("input", { type: "checkbox", class: "keep-running-toggle",
                             "aria-label": "Keep " + name + " running when it is idle",
                             "data-focus-key": "keep:" + server.server_id });
    keep.checked = server.keep_running === true;
    keep.addEventListener("change", function () {
      showError(itemError, "");
      rpc("servers.keep_running", { server_id: server.server_id, keep_running: keep.checked }).then(loadServers, function (err) {
        keep.checked = !keep.checked;
        showError(itemError, "Could not change it. " + err.message);
      });
    });
    var keepLabel = el("label", { class: "keep-running", title: "Otherwise it stops when unused for a while and starts again on its next use" },
                       [keep, " Keep running"]);
    var sampling = samplingControl(server, itemError);
    reconnect.addEventListener("click", function () {
      // Not `disabled`: that would drop keyboard focus; the list refresh keeps it on this button.
      if (reconnect.getAttribute("aria-disabled") === "true") return;
      showError(itemError, "");
      reconnect.setAttribute("aria-disabled", "true");
      rpc("servers.reconnect", { server_id: server.server_id }).then(loadServers, function (err) {
        reconnect.removeAttribute("aria-disabled");
        showError(itemError, "Could not reconnect it. " + err.message);
      });
    });
    remove.addEventListener("click", function () {
      confirmRemove(name).then(function (yes) {
        if (!yes) { remove.focus(); return; }
        showError(itemError, "");
        remove.disabled = true;
        rpc("servers.remove", { server_id: server.server_id }).then(function () {
          return loadServers().then(function () { $("add-server").focus(); });
        }, function (err) {
          remove.disabled = false;
          showError(itemError, "Could not remove it. " + err.message);
        });
      });
    });
    var item = el("li", { class: "server", "data-server-id": server.server_id, "data-status": status }, [
      el("div", { class: "server-head" }, [
        el("h3", { class: "server-name", text: server.title || name }),
        el("span", { class: "badge " + status, text: STATUS_WORDS[status] || status })
      ]),
      server.title && server.title !== name ? el("p", { class: "qualified-name small muted", text: name }) : null,
      // "installed by you, in the terminal", "imported from Claude Desktop": the words come with the list
      el("p", { class: "meta", text: capitalized(server.installed_by_words || "installed by " + server.installed_by) +
        (when && !isNaN(when) ? " on " + when.toLocaleString() : "") +
        (server.version ? " · version " + server.version : "") }),
      status === "failed" && server.reason ? el("p", { class: "error", text: "Problem: " + server.reason }) : null,
      status === "needs_sign_in" ? el("p", { class: "error sign-in-again", text: "Its sign-in no longer works. " +
        "Sign in again: remove it, then add it again; you will be asked to sign in." }) : null,
      server.tools_change ? el("p", { class: server.tools_change.state === "changed" ? "error" : "muted small",
        text: (server.tools_change.state === "changed" ? "Its tools changed since you approved them (held back until you approve): "
               : "You rejected its changed tools (the approved ones stay): ") + server.tools_change.summary }) : null,
      (server.left_out_by_user || []).length ? el("p", { class: "muted small left-out", text: "You left out: " +
        server.left_out_by_user.join(", ") + " (your assistant does not see them; mcp-setup enable " + server.slug +
        " --tool TOOL or its box below turns one back on)." }) : null,  // left out at install or on the card
      details || el("p", { class: "muted small", text: status === "connected" ? "No tools." :
        (status === "disabled" ? "Disabled: its tools are not offered to agents." : "Tools appear once it is connected.") }),
      pick,
      sampling,
      networkPart(server, itemError, loadServers),  // where it may connect: "only these", or the public internet
      detailsPart(server, openMore[server.slug]),  // by slug: an update gives it a new id
      el("div", { class: "row" }, [toggleLabel, enabled ? keepLabel : null, enabled ? reconnect : null, remove]),
      itemError
    ]);
    list.appendChild(item);
  });
  if (focusKey) { // a refresh must not throw keyboard users out of the list
    var again = list.querySelector('[data-focus-key="' + focusKey.replace(/"/g, "") + '"]');
    if (again) again.focus();
  }
}

// "May ask your AI to write text": the person's choice for this server (mcp-setup allow NAME
// --sampling), changed here at once (/rpc servers.sampling); its next request is judged by it.
var SAMPLING_WORDS = [["no", "No"], ["text", "Yes, without tools"], ["tools", "Yes, with tools"]];

function samplingControl(server, itemError) {
  var id = "sampling-" + server.server_id;
  var select = el("select", { id: id, class: "sampling-choice", "data-focus-key": "sampling:" + server.server_id },
    SAMPLING_WORDS.map(function (w) { return el("option", { value: w[0], text: w[1] }); }));
  select.value = server.sampling || "text";
  select.addEventListener("change", function () {
    showError(itemError, "");
    var before = server.sampling || "text";
    rpc("servers.sampling", { server_id: server.server_id, sampling: select.value }).then(loadServers, function (err) {
      select.value = before;
      showError(itemError, "Could not change what it may ask your AI. " + err.message);
    });
  });
  return el("p", { class: "sampling-line small" }, [el("label", { for: id, text: "May ask your AI to write text" }), " ", select]);
}

export function loadServers() {
  return rpc("servers.list", {}).then(function (result) {
    showError($("servers-error"), "");
    renderServers(result.servers || []);
    return result.servers || [];
  }, function (err) {
    showError($("servers-error"), "Could not load the installed servers. " + err.message);
    return [];
  });
}

var reloadTimer = null;
// Status events come in bursts: reload the list once they settle.
export function loadServersSoon() {
  if (reloadTimer) clearTimeout(reloadTimer);
  reloadTimer = setTimeout(function () { reloadTimer = null; loadServers(); }, 150);
}

// ---- the confirm dialog -----------------------------------------------------------------
function confirmRemove(name) {
  var dialog = $("confirm-dialog");
  $("confirm-text").textContent = "“" + name + "” will be stopped and its saved settings and keys deleted from this computer.";
  return new Promise(function (resolve) {
    var settled = false;
    function done(answer) {
      if (settled) return;
      settled = true;
      $("confirm-yes").removeEventListener("click", yes);
      $("confirm-no").removeEventListener("click", no);
      dialog.removeEventListener("cancel", esc);
      dialog.removeEventListener("close", closed);
      if (dialog.open) dialog.close();
      resolve(answer);
    }
    function yes() { done(true); }
    function no() { done(false); }
    function esc(event) { event.preventDefault(); done(false); }
    function closed() { done(false); }
    $("confirm-yes").addEventListener("click", yes);
    $("confirm-no").addEventListener("click", no);
    dialog.addEventListener("cancel", esc);
    dialog.addEventListener("close", closed);
    dialog.showModal();
    $("confirm-no").focus();
  });
}
