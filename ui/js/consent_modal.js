// The consent modal: before a server is tested or installed, the user sees what will run (runner,
// package, version or sha256, the command line with ${KEY} templates), where each secret goes,
// the destination settings (editable: the assistant's values are only suggestions) and any
// warnings (which must be ticked), and the tools a test listed, one ticked box each: the ones the
// user unticks are left out once installed. Approve / Deny are POSTed to
// /api/consents/<consent_id>.

import { $, el, showError } from "./dom.js";
import { postConsent } from "./api.js";
import { isThisRun, note, setBusy } from "./thread.js";
import { loadServersSoon } from "./servers.js";
import { chosen, drawChoices } from "./consent_choices.js";

var queue = [];
var current = null;
var closing = false;

// A changed tool list of an installed server (action "tools_change"): what is new, as written.
function toolRows(c) {
  var t = c.tools_change || {};
  var d = t.diff || {};
  var out = [["Server", c.package + (c.version ? " (version " + c.version + ")" : "")]];
  (t.tools || []).forEach(function (tool) {
    if (tool.change === "added") {
      out.push(["New tool " + tool.name, tool.description || "(no description)"]);
    } else {
      out.push(["Changed tool " + tool.name, "now: " + (tool.description || "(no description)")]);
      out.push(["", "approved: " + (tool.pinned_description || "(no description)")]);
    }
    out.push(["", "inputs: " + tool.inputSchema]);
  });
  if (d.removed && d.removed.length) out.push(["Removed", d.removed.join(", ")]);
  return out;
}

function rows(c) {
  if (c.action === "tools_change") return toolRows(c);
  var server = ["Server", c.server + (c.version ? " (version " + c.version + ")" : "")];
  var network = (c.network || []).map(function (line) { return ["Network", line]; });
  if (c.launch_approved) return [server].concat(network);  // approved at its test: tools (and "only these")
  var out = [server, ["Package", c.package_type + ": " + c.package]];
  if (c.sha256) out.push(["sha256", c.sha256]);
  if (c.runner) out.push(["Runner", c.runner]);
  if (c.command_line && c.command_line.length) out.push(["Command line", c.command_line.join(" ")]);
  if (c.url) out.push(["URL", c.url + " (" + c.transport + ")"]);
  var env = Object.keys(c.env || {}).map(function (k) { return k + "=" + c.env[k]; });
  if (env.length) out.push(["Environment", env.join("\n")]);  // one row, a line each
  Object.keys(c.headers || {}).forEach(function (k) { out.push(["Header", k + ": " + c.headers[k]]); });
  (c.secrets || []).forEach(function (s) {
    out.push(["Secret " + s.key, "sent as " + (s.how.join(", ") || "a setting") + " to " + s.destination +
              (s.host ? " — host " + s.host : "")]);
  });
  (c.sandbox || []).forEach(function (line) { out.push(["Sandbox", line]); });  // what it can see
  return out.concat(network);
}

// One ticked box per tool a test listed; what they cost the assistant's context, kept up to date.
function drawTools(c) {
  var tools = c.action === "tools_change" ? [] : (c.tools || []);
  var list = $("consent-tool-list");
  list.textContent = "";
  $("consent-tools").hidden = !tools.length;
  tools.forEach(function (t, i) {
    var box = el("input", { type: "checkbox", id: "consent-tool-" + i, "data-tool": t.name });
    box.checked = true;
    box.addEventListener("change", toolsChanged);
    var label = el("label", { for: "consent-tool-" + i }, [box, el("code", { text: t.name })]);
    if (t.title) label.appendChild(el("span", { text: t.title }));
    label.appendChild(el("span", { class: "tokens", text: "about " + (t.estimated_tokens || 0) + " tokens" }));
    var item = el("li", {}, [label]);
    if (t.description) item.appendChild(el("p", { class: "note", text: t.description }));
    list.appendChild(item);
  });
  toolsChanged();
}

function toolBoxes() {
  return Array.prototype.slice.call(document.querySelectorAll("#consent-tool-list input[data-tool]"));
}

function toolsChanged() {
  var c = current && current.consent;
  var boxes = toolBoxes();
  if (!c || !boxes.length) return;
  var kept = 0, tokens = 0;
  boxes.forEach(function (box, i) {
    if (box.checked) { kept += 1; tokens += (c.tools[i].estimated_tokens || 0); }
  });
  var note = $("consent-tools-note");
  note.textContent = "You keep " + kept + " of its " + boxes.length + " tools: about " + tokens +
    " tokens in every conversation with your assistant. Untick the ones you do not want; your assistant will not " +
    "see or use them. You can turn one back on later with ";
  note.appendChild(el("code", { text: "mcp-setup enable " + c.server + " --tool TOOL" }));
  note.appendChild(document.createTextNode("."));
  $("consent-tools-none").hidden = kept > 0;
}

var waiting = {}; // consent id -> its "Waiting for you to approve…" note in the thread

export function onConsentRequest(event) {
  if ((current && current.consent_id === event.consent_id) ||
      queue.some(function (c) { return c.consent_id === event.consent_id; })) return;
  queue.push(event);
  if (isThisRun(event.run_id)) waiting[event.consent_id] = note("Waiting for you to approve running " + event.consent.server + "…");
  setBusy("");
  showNext();
}

function showNext() {
  if (current || !queue.length) return;
  current = queue.shift();
  var c = current.consent;
  var tools = c.action === "tools_change";
  $("consent-server").textContent = c.server;
  $("consent-verb").textContent = tools ? "Approve the changed tools of" :
    (c.tools && c.tools.length) ? "Allow mcp-setup to install" : "Allow mcp-setup to run";  // the tools: an install's
  $("consent-intro").hidden = tools || !!c.launch_approved;
  $("consent-tools-only").hidden = !c.launch_approved;
  $("consent-tools-intro").hidden = !tools;
  var launch = $("consent-launch");
  launch.textContent = "";
  rows(c).forEach(function (r) {
    launch.appendChild(el("dt", { text: r[0] }));
    launch.appendChild(el("dd", {}, [el("code", { text: r[1] })]));
  });
  var settings = $("consent-settings");
  settings.textContent = "";
  var destinations = c.launch_approved ? [] : (c.destinations || []);  // chosen at its test already
  if (destinations.length) settings.appendChild(el("h3", { text: "Where it connects" }));
  destinations.forEach(function (d) {
    var id = "consent-setting-" + d.name;
    settings.appendChild(el("label", { for: id, text: d.name }));
    if (d.description) settings.appendChild(el("p", { class: "note", text: d.description }));
    settings.appendChild(el("p", { class: "note", text: "The assistant suggested " + d.suggested +
      ". Change it if that is not where your secrets should go; the value here is the one used." }));
    var input = el("input", { id: id, type: "text", autocomplete: "off", "data-setting": d.name });
    input.value = d.suggested;
    input.spellcheck = false;
    settings.appendChild(input);
  });
  drawTools(c);
  drawChoices($("consent-choices"), c.choices);
  var list = $("consent-warning-list");
  list.textContent = "";
  (c.warnings || []).forEach(function (w) {
    list.appendChild(el("li", {}, [el("strong", { text: w.code }), ": " + w.message]));
  });
  $("consent-warnings").hidden = !(c.warnings && c.warnings.length);
  $("consent-accept").checked = false;
  $("consent-widen").hidden = !c.widenable;  // the user's widening of the sandbox
  $("consent-extra").value = "";
  $("consent-offline").checked = false;
  var homeList = $("consent-home-list");  // files of the home its command line names: unticked
  homeList.textContent = "";
  (c.home_files || []).forEach(function (path) {
    var box = el("input", { type: "checkbox", "data-home-file": path });
    homeList.appendChild(el("li", {}, [el("label", { class: "check" }, [box, " Let it read " + path])]));
  });
  $("consent-home-files").hidden = !(c.home_files && c.home_files.length);
  var only = c.only_these || [];  // after a test: narrow it to the destinations it reached
  $("consent-only").hidden = !only.length;
  $("consent-only-these").checked = false;
  $("consent-only-list").textContent = only.join(", ");
  showError($("consent-error"), "");
  setDisabled(false);
  var dialog = $("consent-dialog");
  if (!dialog.open) dialog.showModal();
  $("consent-approve").focus();
}

function setDisabled(busy) {
  $("consent-approve").disabled = busy;
  $("consent-deny").disabled = busy;
}

function close() {
  current = null;
  if (queue.length) { showNext(); return; }
  var dialog = $("consent-dialog");
  if (dialog.open) { closing = true; dialog.close(); }
}

function send(body) {
  var asked = current;
  setDisabled(true);
  postConsent(asked.consent_id, body).then(function () {
    if (current === asked) close();
  }, function (err) {
    if (current !== asked) return;
    setDisabled(false);
    if (err.code === "invalid_input" || err.code === "network" || err.code === "internal") {
      showError($("consent-error"), err.message);
    } else {
      close();
      note(err.message);
    }
  });
}

function approve(event) {
  event.preventDefault();
  if (!current) return;
  var c = current.consent;
  if (c.warnings && c.warnings.length && !$("consent-accept").checked) {
    showError($("consent-error"), "Tick the box to accept the warnings, or press Deny.");
    return;
  }
  var settings = {};
  Array.prototype.forEach.call(document.querySelectorAll("#consent-settings input[data-setting]"), function (input) {
    settings[input.getAttribute("data-setting")] = input.value;
  });
  var body = { approve: true, settings: settings, accept_warnings: $("consent-accept").checked,
               hidden_tools: toolBoxes().filter(function (b) { return !b.checked; })
                 .map(function (b) { return b.getAttribute("data-tool"); }),
               choices: chosen($("consent-choices")) };
  if (c.widenable) {
    var extra = $("consent-extra").value.trim();
    var reads = Array.prototype.filter.call(document.querySelectorAll("#consent-home-list input[data-home-file]"),
      function (box) { return box.checked; }).map(function (box) { return box.getAttribute("data-home-file"); });
    body.sandbox = { extra_paths: extra ? [extra] : [], network: !$("consent-offline").checked, reads: reads };
  }
  if ((c.only_these || []).length && $("consent-only-these").checked) {
    body.sandbox = Object.assign(body.sandbox || {}, { only_these: true });
  }
  send(body);
}

function deny() {
  if (current) send({ deny: true });
}

export function onConsentDone(event) {
  loadServersSoon(); // an answered tool-list change changes what the list shows
  var shown = waiting[event.consent_id];  // the "Waiting for you…" note goes once it is answered
  if (shown) { shown.remove(); delete waiting[event.consent_id]; }
  queue = queue.filter(function (c) { return c.consent_id !== event.consent_id; });
  if (current && current.consent_id === event.consent_id) close();
}

export function initConsentModal() {
  $("consent-form").addEventListener("submit", approve);
  $("consent-deny").addEventListener("click", deny);
  $("consent-dialog").addEventListener("cancel", function (e) { e.preventDefault(); deny(); });
  $("consent-dialog").addEventListener("close", function () {
    if (closing) { closing = false; return; }
    if (current) deny();
  });
}
