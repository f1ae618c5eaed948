// The conversation with the setup assistant (the "Add MCP server…" thread): the current run,
// messages and notes, the busy line, questions shown as buttons or a text field, and the final
// status card. Progress steps are in progress.js; the pane around the thread is in setup.js.

import { $, el, showError } from "./dom.js";
import { plain } from "./errors.js";
import { send } from "./api.js";
import { loadServers, toolList } from "./servers.js";
import { clientsCard } from "./clients.js";

var run = null; // {id, done}
var questionNodes = {}; // question_id → {node, controls}

export function hasRun() { return !!run; }
export function runDone() { return !!run && run.done; }
export function currentRunId() { return run && run.id; }
export function currentGoal() { return run ? run.goal : ""; }
export function isThisRun(runId) { return !!run && run.id === runId; }

// Send a message to the assistant; if the websocket is down, say so in the thread.
export function sendToAgent(obj) {
  if (!send(obj)) note(plain("network"));
}

export function addToThread(node) {
  $("thread").appendChild(node);
  node.scrollIntoView({ block: "nearest" });
  return node;
}

export function message(kind, who, text) {
  return addToThread(el("li", { class: "msg " + kind }, [el("span", { class: "who", text: who }), text]));
}

export function note(text) {
  return addToThread(el("li", { class: "msg note", text: text }));
}

export function setBusy(text) {
  $("busy").textContent = text || "";
  $("busy").hidden = !text;
}

// Keyboard focus back to the thread's action button (after the secret box closes).
export function focusThreadAction() {
  if ($("thread-area").hidden) return;
  if ($("cancel-agent").hidden) $("new-setup").focus();
  else $("cancel-agent").focus();
}

// The person's own choice that ended a step (a Deny, a cancelled key): the result card says it in
// their words, not the assistant's summary.
export function noteOwnChoice(text) { if (run) run.ownChoice = text; }

export function beginThread(runId, goal) {
  run = { id: runId, done: false, ownChoice: null, goal: goal };
  questionNodes = {};
  $("setup").hidden = false;
  $("add-server").setAttribute("aria-expanded", "true");
  $("start-area").hidden = true;
  $("thread-area").hidden = false;
  $("thread").textContent = "";
  $("new-setup").hidden = true;
  $("cancel-agent").hidden = false;
  $("cancel-agent").disabled = false;
  message("user", "You", goal);
  setBusy("The setup assistant is starting…");
}

// "Set up another server": forget the run and go back to the goal field.
export function resetThread() {
  run = null;
  questionNodes = {};
  $("thread").textContent = "";
  $("thread-area").hidden = true;
  $("start-area").hidden = false;
  $("busy").hidden = true;
  $("new-setup").hidden = true;
  $("cancel-agent").hidden = false;
  $("cancel-agent").disabled = false;
  $("goal").value = "";
  showError($("goal-error"), "");
  $("goal").focus();
}

export function onQuestion(event) {
  setBusy("");
  var node = el("li", { class: "msg question", "data-question-id": event.question_id }, [
    el("span", { class: "who", text: "The assistant asks" }), el("p", { text: event.question })
  ]);
  var buttons = [];
  if (event.choices && event.choices.length) {
    var group = el("div", { class: "choices", role: "group", "aria-label": event.question });
    event.choices.forEach(function (choice) {
      var b = el("button", { type: "button", class: "choice", text: choice });
      b.addEventListener("click", function () { answer(event.question_id, choice, b); });
      group.appendChild(b);
      buttons.push(b);
    });
    node.appendChild(group);
  } else {
    var inputId = "answer-" + event.question_id;
    var input = el("input", { type: "text", id: inputId, autocomplete: "off", maxlength: "2000" });
    var submit = el("button", { type: "submit", class: "primary", text: "Send" });
    var form = el("form", null, [
      el("label", { for: inputId, text: "Your answer" }),
      el("div", { class: "row" }, [input, submit]),
      el("p", { class: "small muted", text: "Never type a key or password here: the assistant asks for those in a separate, hidden box." })
    ]);
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      // An empty answer is an answer: "press Enter to stop", "press Enter for the default".
      var text = input.value.trim() ? input.value : "";
      answer(event.question_id, text, null);
      message("user", "You", text || "(pressed Enter)");
    });
    node.appendChild(form);
    buttons.push(input, submit);
  }
  questionNodes[event.question_id] = { node: node, controls: buttons };
  addToThread(node);
  if (!$("secret-dialog").open && buttons.length) buttons[0].focus();
}

function answer(questionId, text, button) {
  var q = questionNodes[questionId];
  if (q) q.controls.forEach(function (c) { c.disabled = true; });
  if (button) button.classList.add("chosen");
  sendToAgent({ type: "answer", question_id: questionId, answer: text });
}

export function onQuestionClosed(event) {
  var q = questionNodes[event.question_id];
  if (!q) return;
  q.controls.forEach(function (c) {
    c.disabled = true;
    if (event.answer !== undefined && c.textContent === event.answer) c.classList.add("chosen");
  });
}

export function onDone(event) {
  var result = event.result || {};
  if (run) run.done = true;
  setBusy("");
  Object.keys(questionNodes).forEach(function (id) { questionNodes[id].controls.forEach(function (c) { c.disabled = true; }); });
  var status = result.status || "failed";
  var ownChoice = run && run.ownChoice && status !== "installed" ? run.ownChoice : null;
  var title = status === "installed" ? "Installed and connected" : status === "cancelled" ? "Setup cancelled"
    : ownChoice ? "Not installed" : "Setup did not finish";
  var tools = result.tools || [];
  // The agent's sentence names the server id too ("Installed X (srv_…)."): not a word for a person.
  var summary = (ownChoice || result.summary || "").replace(/ \(srv_[0-9a-f]+\)/, "");
  // The tool list is shown once, in this card: not again in the summary's
  // sentence, nor in the test steps above.
  if (tools.length) {
    summary = summary.replace(/\s*Tools now available: [^\n]*?\.(?=\s|$)/, "");
    Array.prototype.forEach.call($("thread").querySelectorAll(".steps .tool-list"), function (list) {
      var words = list.previousElementSibling;
      if (words && words.classList.contains("tools-found")) words.textContent = words.textContent.replace(/:$/, " (listed below).");
      list.remove();
    });
  }
  var server = el("div", { class: "installed-server", hidden: true });
  var card = el("li", { class: "result-card " + status, role: "status" }, [
    el("h4", { text: (status === "installed" ? "✓ " : "") + title }),
    server,
    el("p", { text: summary })
  ]);
  if (tools.length) {
    card.appendChild(el("p", { class: "small", text: "Tools now available:" }));
    card.appendChild(toolList(tools));
  }
  addToThread(card);
  if (status === "installed") addToThread(clientsCard());  // the last step: the tools in the person's client
  $("cancel-agent").hidden = true;
  $("new-setup").hidden = false;
  $("new-setup").focus();
  loadServers().then(function (servers) {  // its title, with the qualified name under it
    var found = result.server_id && servers.filter(function (s) { return s.server_id === result.server_id; })[0];
    if (!found) return;
    server.appendChild(el("div", { class: "server-title", text: found.title || found.qualified_name }));
    if (found.title && found.title !== found.qualified_name) {
      server.appendChild(el("div", { class: "qualified-name small muted", text: found.qualified_name }));
    }
    server.hidden = false;
  });
}
