// The consent modal: before a server is tested or installed, the person reads the consent's document
// (who asked; their settings first, where each secret goes, the destination settings editable:
// the assistant's values are only suggestions; what runs; the sandbox; the network; the tools a
// test listed, one ticked box each, the ones unticked left out once installed; the package's
// internals folded under "Technical details") and any warnings (which must be ticked). Approve /
// Deny are POSTed to /api/consents/<consent_id>.

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

function dl(lines) {
  var list = el("dl", { class: "consent-launch" });
  lines.forEach(function (line) {
    if (line.label) list.appendChild(el("dt", { text: line.label }));
    // a setting's value or a command in code; a sentence (no label) as words
    list.appendChild(line.label ? el("dd", {}, [el("code", { text: line.text })]) : el("dd", { class: "whole", text: line.text }));
  });
  return list;
}

// The consent's document (consent_request.py's consent_document, the same the consent page and the
// terminals draw): its sections in order, each followed by what the person may change there (the
// destinations under their settings, the widening under the sandbox, "only these" under the network,
// the tool boxes as the tools); the technical details folded.
function drawDocument(c) {
  var box = $("consent-launch");
  var controls = { settings: $("consent-settings"), sandbox: $("consent-widen"), network: $("consent-only"),
                   tools: $("consent-tools") };  // taken before the box is emptied: they move into it
  box.textContent = "";
  if (c.action === "tools_change") {
    box.appendChild(dl(toolRows(c).map(function (r) { return { label: r[0], text: r[1] }; })));
  } else {
    ((c.document || {}).sections || []).forEach(function (section) {
      if (section.key !== "tools") {
        var lines = dl(section.lines || []);
        if (section.folded) box.appendChild(el("details", { class: "technical" }, [el("summary", { text: section.title }), lines]));
        else { box.appendChild(el("h3", { text: section.title })); box.appendChild(lines); }
      }
      if (controls[section.key]) { box.appendChild(controls[section.key]); delete controls[section.key]; }
    });
  }
  Object.keys(controls).forEach(function (key) { box.appendChild(controls[key]); });  // none to show, kept in place
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
  var budget = budgetWords(c.budget || {}, kept ? tokens : 0);
  if (budget) note.appendChild(el("span", { class: "budget-line", text: " " + budget }));
  $("consent-tools-none").hidden = kept > 0;
}

// Where the ticked tools leave the context budget, as the person unticks (the words of
// setup_agent/gateway/budget.py's adds_words after the sentence above).
function budgetWords(budget, tokens) {
  if (budget.budget === undefined) return "";
  if (budget.budget <= 0) return "No budget is set: every tool is listed.";
  var used = (budget.listed || 0) + tokens;
  var line = "With them, AI clients are listed " + used.toLocaleString("en-US") + " of your budget of " +
    budget.budget.toLocaleString("en-US") + " tokens.";
  if (used > budget.budget) {
    line += " Past the budget, AI clients are listed the tools used most recently, then, as room is left, the " +
      "others by server in the order the servers were installed; the rest, these among them until used, are " +
      "reached through mcp_setup_find_tools.";
  }
  return line;
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
  var doc = c.document || { title: "", asked: "", intro: "" };
  $("consent-server").textContent = c.server;
  // "Allow mcp-setup to install" of "Allow mcp-setup to install <server>?"
  $("consent-verb").textContent = tools ? "Approve the changed tools of" :
    doc.title.slice(0, Math.max(0, doc.title.length - c.server.length - 1)).trim();
  $("consent-asked").textContent = tools ? "" : doc.asked;
  $("consent-asked").hidden = tools;
  $("consent-intro").textContent = tools ? "" : doc.intro;
  $("consent-intro").hidden = tools;
  $("consent-tools-intro").hidden = !tools;
  drawDocument(c);
  var settings = $("consent-settings");
  settings.textContent = "";
  (c.destinations || []).forEach(function (d) {
    var id = "consent-setting-" + d.name;
    settings.appendChild(el("label", { for: id, text: "Where it connects: " + d.name }));
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
