// An installed server's own request, shown in the tab that ran its tool ("Try" on a card): a form
// to fill in or a page to open. It is framed as the server's (its name and icon, "<server> asks",
// a frame of its own: class "relayed", data-origin="installed-server"), never in mcp-setup's voice;
// mcp-setup's own boxes (the key box, the consent) keep their look. The answer is POSTed to
// /api/relayed/<request_id> and goes back to the server through mcp-setup's checks.

import { $, el, showError } from "./dom.js";
import { postSecret } from "./api.js";

var queue = [];
var current = null;
var closing = false;

export function onRelayedRequest(event) {
  queue.push(event);
  showNext();
}

export function onRelayedDone(event) {
  queue = queue.filter(function (r) { return r.request_id !== event.request_id; });
  if (current && current.request_id === event.request_id) close();
}

function field(f, i) {
  var id = "relayed-field-" + i;
  var label = el("label", { for: id, text: f.title || f.name });
  var input;
  if (f.options && f.options.length) {
    input = el("select", { id: id, "data-field": f.name, "data-type": f.type },
      f.options.map(function (o) { return el("option", { value: o, text: o }); }));
    if (f["default"] !== undefined) input.value = String(f["default"]);
  } else if (f.type === "boolean") {
    input = el("input", { id: id, type: "checkbox", "data-field": f.name, "data-type": f.type });
    input.checked = f["default"] === true;
    label = el("label", { class: "check", for: id }, [input, " " + (f.title || f.name)]);
    return el("div", { class: "relayed-field" }, [label, f.description ? el("p", { class: "note", text: f.description }) : null]);
  } else {
    input = el("input", { id: id, type: f.type === "string" ? "text" : "number", "data-field": f.name,
                          "data-type": f.type, autocomplete: "off" });
    if (f["default"] !== undefined) input.value = String(f["default"]);
    input.spellcheck = false;
  }
  return el("div", { class: "relayed-field" }, [label, f.description ? el("p", { class: "note", text: f.description }) : null, input]);
}

function showNext() {
  if (current || !queue.length) return;
  current = queue.shift();
  var origin = current.origin || {};
  var title = origin.title || origin.slug || "An installed server";
  $("relayed-server").textContent = title;
  $("relayed-name").textContent = title;
  $("relayed-slug").textContent = origin.slug || "";
  var icon = $("relayed-icon");
  icon.hidden = !origin.icon;
  if (origin.icon) icon.src = origin.icon; else icon.removeAttribute("src");
  $("relayed-message").textContent = current.message || "";
  var fields = $("relayed-fields");
  fields.textContent = "";
  var isUrl = current.mode === "url";
  (isUrl ? [] : current.fields || []).forEach(function (f, i) { fields.appendChild(field(f, i)); });
  $("relayed-link").hidden = !isUrl;
  if (isUrl) {
    var link = $("relayed-url");
    link.href = current.url;
    link.textContent = current.url;
    var host = "";
    try { host = new URL(current.url).hostname; } catch (err) { host = current.url; }
    $("relayed-host").textContent = host;
  }
  $("relayed-send").textContent = isUrl ? "Done" : "Send";
  showError($("relayed-error"), "");
  setDisabled(false);
  var dialog = $("relayed-dialog");
  if (!dialog.open) dialog.showModal();
}

function setDisabled(busy) {
  ["relayed-send", "relayed-decline", "relayed-cancel"].forEach(function (id) { $(id).disabled = busy; });
}

function close() {
  current = null;
  if (queue.length) { showNext(); return; }
  var dialog = $("relayed-dialog");
  if (dialog.open) { closing = true; dialog.close(); }
}

function content() {
  var out = {};
  Array.prototype.forEach.call(document.querySelectorAll("#relayed-fields [data-field]"), function (input) {
    var type = input.getAttribute("data-type");
    var name = input.getAttribute("data-field");
    if (type === "boolean") out[name] = input.checked;
    else if (input.value === "") return;
    else if (type === "number" || type === "integer") out[name] = Number(input.value);
    else out[name] = input.value;
  });
  return out;
}

function send(body) {
  var asked = current;
  if (!asked) return;
  setDisabled(true);
  postSecret(asked.request_id, body, "/api/relayed/").then(function () {
    if (current === asked) close();
  }, function (err) {
    if (current !== asked) return;
    setDisabled(false);
    showError($("relayed-error"), err.message);
  });
}

export function initRelayedModal() {
  $("relayed-form").addEventListener("submit", function (event) {
    event.preventDefault();
    send(current && current.mode === "url" ? { action: "accept" } : { action: "accept", content: content() });
  });
  $("relayed-decline").addEventListener("click", function () { send({ action: "decline" }); });
  $("relayed-cancel").addEventListener("click", function () { send({ action: "cancel" }); });
  $("relayed-dialog").addEventListener("cancel", function (e) { e.preventDefault(); send({ action: "cancel" }); });
  $("relayed-dialog").addEventListener("close", function () {
    if (closing) { closing = false; return; }
    if (current) send({ action: "cancel" });
  });
}
