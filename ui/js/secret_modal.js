// The secret modal: a queue of the broker's requests for a key, one masked field at a time
// (a native modal <dialog>, so focus stays inside it), Save and Cancel, Esc as a cancel.
// The value is POSTed to /api/secrets/<prompt_id> and the field cleared at once: it is never
// sent over the websocket nor kept in the page.

import { $, showError } from "./dom.js";
import { postSecret } from "./api.js";
import { focusThreadAction, hasRun, isThisRun, note, setBusy } from "./thread.js";

var promptQueue = [];
var currentPrompt = null;
var focusBeforePrompt = null;
var closingPrompt = false; // the dialog's "close" event comes later: ours, not the browser's

// Short or guessable values: the same rule as setup_agent/prompts.py
// is_weak_value. The value is only inspected as it is typed, never kept or sent anywhere else.
export var WEAK_VALUE_WARNING =
  "This value is short or easy to guess (under 8 characters, or a word, a date or a simple pattern " +
  "such as Summer2024!). mcp-setup hides it from the assistant, but such a value cannot be protected " +
  "against a determined agent: it could find it by guessing.";
var COMMON_WORDS = ["password", "passwort", "qwerty", "azerty", "letmein", "welcome", "admin", "secret",
  "changeme", "iloveyou", "monkey", "dragon", "master", "login", "abc123", "111111", "123123", "summer",
  "winter", "spring", "autumn", "football", "baseball", "princess", "sunshine", "shadow", "trustno1"];
var WORD_DIGITS = /^(?:[A-Za-z]{2,}[0-9]{0,4}[^A-Za-z0-9]{0,3}|[0-9]{1,4}[A-Za-z]{2,}[^A-Za-z0-9]{0,3})$/;
var SEQUENCES = ["0123456789", "abcdefghijklmnopqrstuvwxyz", "qwertyuiop", "asdfghjkl", "zxcvbnm"];

export function isWeakValue(value) {
  var text = String(value || "").trim();
  if (text.length < 8) return true;
  var lower = text.toLowerCase();
  if (/^[0-9]+$/.test(text) || new Set(lower).size <= 3 || (text.length <= 20 && WORD_DIGITS.test(text))) return true;
  if (COMMON_WORDS.some(function (w) { return lower.indexOf(w) >= 0; })) return true;
  return text.length < 16 && SEQUENCES.some(function (seq) {
    return seq.indexOf(lower) >= 0 || seq.split("").reverse().join("").indexOf(lower) >= 0;
  });
}

function weakWarning() {
  var el = $("secret-weak");
  if (!el) { // created once, right after the field (index.html stays as it is)
    el = document.createElement("p");
    el.id = "secret-weak";
    el.className = "note warning";
    el.setAttribute("aria-live", "polite");
    el.hidden = true;
    el.textContent = WEAK_VALUE_WARNING;
    $("secret-value").insertAdjacentElement("afterend", el);
  }
  return el;
}

function checkWeak() {
  var input = $("secret-value");
  weakWarning().hidden = !input.value || !isWeakValue(input.value);
}

export function onSecretRequest(event) {
  if ((currentPrompt && currentPrompt.prompt_id === event.prompt_id) ||
      promptQueue.some(function (p) { return p.prompt_id === event.prompt_id; })) return;
  promptQueue.push(event);
  if (isThisRun(event.run_id)) {
    note("Waiting for you to enter " + event.key_name + " in the secret box…");
  }
  setBusy("");
  showNextPrompt();
}

function showNextPrompt() {
  var dialog = $("secret-dialog");
  if (currentPrompt || !promptQueue.length) return;
  currentPrompt = promptQueue.shift();
  $("secret-key").textContent = currentPrompt.key_name;
  $("secret-server").textContent = currentPrompt.server ? "For the server " + currentPrompt.server : "";
  $("secret-server").hidden = !currentPrompt.server;
  $("secret-prompt").textContent = currentPrompt.prompt || "";
  $("secret-label").textContent = "Your " + currentPrompt.key_name;
  $("secret-value").value = "";
  weakWarning().hidden = true;
  showError($("secret-error"), "");
  setSecretBusy(false);
  if (!focusBeforePrompt) focusBeforePrompt = document.activeElement;
  if (!dialog.open) dialog.showModal();
  $("secret-value").focus();
}

function setSecretBusy(busy) {
  $("secret-submit").disabled = busy;
  $("secret-cancel").disabled = busy;
  $("secret-value").disabled = busy;
}

function closePrompt() {
  var dialog = $("secret-dialog");
  $("secret-value").value = "";
  currentPrompt = null;
  if (promptQueue.length) { showNextPrompt(); return; } // the dialog stays open for the next one
  if (dialog.open) { closingPrompt = true; dialog.close(); }
  var back = focusBeforePrompt;
  focusBeforePrompt = null;
  if (back && document.body.contains(back) && !back.disabled) back.focus();
  else focusThreadAction();
}

function submitSecret(event) {
  event.preventDefault();
  if (!currentPrompt) return;
  var input = $("secret-value");
  if (!input.value.trim()) {
    showError($("secret-error"), "Please enter your " + currentPrompt.key_name + ", or press Cancel.");
    input.focus();
    return;
  }
  var body = { value: input.value };
  input.value = ""; // the field never keeps the value
  weakWarning().hidden = true;
  var prompt = currentPrompt;
  setSecretBusy(true);
  showError($("secret-error"), "");
  postSecret(prompt.prompt_id, body).then(function () {
    body = null;
    if (currentPrompt === prompt) closePrompt();
  }, function (err) {
    body = null;
    if (currentPrompt !== prompt) return;
    setSecretBusy(false);
    if (err.code === "invalid_input") {
      showError($("secret-error"), "Please enter your " + prompt.key_name + ", or press Cancel.");
      input.focus();
    } else if (err.code === "network" || err.code === "internal") {
      showError($("secret-error"), "It was not saved. " + err.message + " Type it again and press Save.");
      input.focus();
    } else {
      closePrompt();
      note(err.message);
    }
  });
}

function cancelSecret() {
  if (!currentPrompt) return;
  var prompt = currentPrompt;
  $("secret-value").value = "";
  setSecretBusy(true);
  postSecret(prompt.prompt_id, { cancel: true }).then(function () {
    if (currentPrompt === prompt) closePrompt();
  }, function (err) {
    if (currentPrompt === prompt) closePrompt();
    if (err.code !== "prompt_cancelled" && err.code !== "prompt_not_found") note(err.message);
  });
}

export function onSecretDone(event) {
  if (hasRun() && event.status === "answered") note(event.key_name + " saved. The assistant only gets a reference to it, never the value.");
  if (hasRun() && event.status === "cancelled") note("You cancelled entering " + event.key_name + ". The assistant was told.");
  if (hasRun() && event.status === "expired") note("The request for " + event.key_name + " expired.");
  promptQueue = promptQueue.filter(function (p) { return p.prompt_id !== event.prompt_id; });
  if (currentPrompt && currentPrompt.prompt_id === event.prompt_id) closePrompt();
}

export function initSecretModal() {
  $("secret-form").addEventListener("submit", submitSecret);
  $("secret-value").addEventListener("input", checkWeak);
  $("secret-cancel").addEventListener("click", cancelSecret);
  $("secret-dialog").addEventListener("cancel", function (e) { e.preventDefault(); cancelSecret(); });
  // Closed by the browser itself (e.g. Esc pressed twice): still a cancel, so the assistant is told.
  $("secret-dialog").addEventListener("close", function () {
    if (closingPrompt) { closingPrompt = false; return; }
    if (currentPrompt) cancelSecret();
  });
}
