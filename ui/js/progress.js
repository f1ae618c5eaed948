// Progress events of the current run, shown in the thread: the busy line while the assistant
// calls a tool, and one block of steps per test or install (✓ done, … in progress, ✗ failed),
// with the problem in plain words when a step fails, or the tools found when it works. A remote
// that needs its user to sign in (oauth_required, needs_sign_in) is not a failure: the block says
// sign-in is needed and offers the sign-in box once the assistant has asked for it.

import { el } from "./dom.js";
import { plain } from "./errors.js";
import { openSignIn } from "./oauth_modal.js";
import { toolList } from "./servers.js";
import { addToThread, currentGoal, note, noteOwnChoice, runDone, sendToAgent, setBusy } from "./thread.js";

var ACTIVITY = {
  mcp_setup_search: "Searching the server directories…",
  mcp_setup_get: "Reading the server's details…",
  mcp_setup_request_secret: "Waiting for you to enter a key…",
  mcp_setup_test_connection: "Testing the server…",
  mcp_setup_install_and_connect: "Installing and connecting the server…"
};

// The core's stages of a test or install. "downloading" happens for packages fetched first
// (npm, PyPI, Docker, MCPB bundles): its row is added when the first downloading event arrives. "installing" and "connected" are
// the install's own steps after the test.
var STAGE_WORDS = {
  resolving: "Look up the server",
  downloading: "Download its bundle",
  starting: "Start it on this computer",
  handshake: "Check that it answers",
  tools_listed: "List its tools",
  installing: "Save it on this computer",
  connected: "Connect it"
};
export var STAGE_BUSY = {
  resolving: "Looking up the server…",
  downloading: "Downloading the server's bundle…",
  starting: "Starting the server…",
  installing: "Saving the server on this computer…",
  connected: "Connecting the server…"
};
var TEST_STAGES = ["resolving", "starting", "handshake", "tools_listed"];
var INSTALL_STAGES = TEST_STAGES.concat(["installing", "connected"]);
var INSTALL = "mcp_setup_install_and_connect";
var ICON = { pending: "○", started: "…", done: "✓", failed: "✗", sign_in: "…", not_allowed: "–" };
var STATUS_TEXT = { pending: "not yet", started: "in progress", done: "done", failed: "failed", sign_in: "waiting for you to sign in",
  not_allowed: "not run: you did not allow it" };
// Codes that are the person's own choice, not a failure: drawn as such, with no "It did not work".
var OWN_CHOICE = { consent_denied: "You did not allow it. Nothing was run.",
  prompt_cancelled: "You cancelled entering the key. Nothing was run." };
// Codes that mean "the user signs in", answered by the sign-in box (oauth_modal.js), not failures.
var SIGN_IN = { oauth_required: true, needs_sign_in: true };

var steps = null; // the current test/install steps block, until it ends
var signInButtons = []; // {server, button}: the "Open the sign-in box" buttons of blocks waiting for a sign-in

// While a server starts: the seconds spent against the deadline, ticking, and the
// server's latest stderr line (redacted by the core).
function startWatch(event) {
  stopWatch();
  var began = Date.now();
  var limit = event.deadline_seconds;
  var clock = el("span", { class: "elapsed" });
  var line = el("code", { class: "stderr-line" });
  var said = el("p", { class: "small muted server-says", hidden: true }, ["The server says: ", line]);
  var box = el("div", { class: "starting-watch", "aria-live": "off" }, [el("p", { class: "small" }, [clock]), said]);
  function tick() {
    var spent = Math.floor((Date.now() - began) / 1000);
    clock.textContent = "Starting: " + spent + " s" + (limit ? " of at most " + Math.round(limit) + " s" : "");
  }
  tick();
  steps.block.appendChild(box);
  steps.watch = { box: box, line: line, said: said, timer: setInterval(tick, 1000) };
}

function stopWatch() {
  if (!steps || !steps.watch) return;
  clearInterval(steps.watch.timer);
  steps.watch.box.remove();
  steps.watch = null;
}

function stepItem(stage) {
  var icon = el("span", { class: "icon", "aria-hidden": "true", text: ICON.pending });
  var state = el("span", { class: "visually-hidden", text: STATUS_TEXT.pending });
  var li = el("li", { class: "step", "data-stage": stage, "data-status": "pending" }, [icon, el("span", null, [STAGE_WORDS[stage], " ", state])]);
  return { li: li, icon: icon, state: state };
}

function newSteps(event) {
  var action = event.action || "";
  var title = action === INSTALL ? "Installing" : "Testing";
  var order = (action === INSTALL ? INSTALL_STAGES : TEST_STAGES).slice();
  var list = el("ol");
  var items = {};
  order.forEach(function (stage) {
    items[stage] = stepItem(stage);
    list.appendChild(items[stage].li);
  });
  var block = el("li", { class: "steps", "data-action": action }, [
    el("h4", { text: title + (event.server ? " " + event.server : "") }), list
  ]);
  addToThread(block);
  return { block: block, list: list, items: items, order: order, action: action, tools: [] };
}

function addDownloadStep() {
  if (steps.items.downloading) return;
  var item = stepItem("downloading");
  item.counter = el("span", { class: "small muted counter" });  // a first npx fetch takes 20+ s: show it moving
  item.li.appendChild(item.counter);
  steps.items.downloading = item;
  steps.list.insertBefore(item.li, steps.items.starting.li);
  steps.order.splice(steps.order.indexOf("starting"), 0, "downloading");
}

// The download's elapsed seconds and packages fetched so far, from its progress events.
function countDownload(event) {
  var counter = steps.items.downloading.counter;
  var parts = [];
  if (typeof event.elapsed_seconds === "number") parts.push(Math.round(event.elapsed_seconds) + " s");
  if (typeof event.fetched === "number" && event.fetched > 0) parts.push(event.fetched + (event.fetched === 1 ? " package" : " packages"));
  if (event.status === "failed") counter.textContent = counter.textContent.replace(/ so far$/, "");
  else if (parts.length) counter.textContent = " · " + parts.join(", ") + (event.status === "done" ? "" : " so far");
}

function setStep(stage, status) {
  var item = steps && steps.items[stage];
  if (!item) return;
  item.li.dataset.status = status;
  item.icon.textContent = ICON[status] || "";
  item.state.textContent = STATUS_TEXT[status] || status;
}

function foundTools(tools) {
  return tools.length === 1 ? "Found 1 tool" : "Found " + tools.length + " tools";
}

function showSignInNeeded(event) {
  var button = el("button", { type: "button", class: "open-sign-in", text: "Open the sign-in box", hidden: true });
  button.addEventListener("click", function () { openSignIn(event.server); });
  signInButtons.push({ server: event.server || "", button: button });
  var who = event.server || "This server";
  steps.block.appendChild(el("div", { class: "sign-in-needed", role: "status" }, [
    el("strong", { text: "Sign-in needed. " }),
    who + " asks you to sign in with your account before it can be used. " +
      "The sign-in box opens when the assistant asks for it; once you have signed in, the server is tested again. ",
    button
  ]));
}

// The assistant asked for a sign-in (an oauth_request frame): the blocks of that server offer its box.
export function offerSignIn(request) {
  var server = (request && request.server) || "";
  signInButtons.forEach(function (entry) { if (entry.server === server) entry.button.hidden = false; });
}

// What failed, in words: the core's reason when it knows one ("npm has no package X"), else the
// code's sentence.
function problemText(event) {
  if (event.stage === "connected" && !event.code)
    return "It was installed, but it did not connect. The list of installed servers above says why; you can press Reconnect there.";
  if (event.code === "download_failed") return event.message;  // the package, the registry and why, in one sentence
  if (event.reason) {
    if (event.stage === "downloading") return "It could not be downloaded: " + event.reason + ".";
    return event.reason.charAt(0).toUpperCase() + event.reason.slice(1) + ".";
  }
  return plain(event.code, event.message);
}

// A download that failed (no network, the registry not answering): the same setup again, once
// the assistant has finished this one.
function tryAgainButton() {
  var goal = currentGoal();
  if (!goal) return null;
  var button = el("button", { type: "button", class: "try-again", text: "Try again" });
  button.addEventListener("click", function () {
    if (!runDone()) { note("The assistant is still on this setup: press Try again once it has finished."); return; }
    sendToAgent({ type: "start_agent", goal: goal });
  });
  return button;
}

function showProblem(event) {
  var text = problemText(event);
  steps.block.appendChild(el("div", { class: "problem", role: "alert" }, [
    el("strong", { text: "It did not work. " }), text,
    event.message && event.message !== text ? el("details", null, [el("summary", { text: "Technical details" }), el("p", { text: event.message })]) : null,
    event.code === "download_failed" ? tryAgainButton() : null
  ]));
}

export function onProgress(event) {
  if (event.stage === "agent_step") {
    if (event.step === "tool_call") setBusy(ACTIVITY[event.tool] || "Working…");
    else if (event.step === "tool_result") setBusy("");
    return;
  }
  if (!STAGE_WORDS[event.stage]) return;
  if (steps && !steps.block.isConnected) { stopWatch(); steps = null; } // the thread was cleared (new run or reset)
  if (event.status === "output") {  // a stderr line while it starts, not a step
    if (steps && steps.watch && event.stderr_line) {
      steps.watch.line.textContent = event.stderr_line;
      steps.watch.said.hidden = false;
    }
    return;
  }
  // A new call starts a new block (a failure before its first step, too).
  if (!steps || steps.action !== (event.action || "") || (event.stage === "resolving" && event.status === "started")) {
    stopWatch();
    signInButtons.forEach(function (entry) { entry.button.hidden = true; }); // signed in, or moved on
    signInButtons = [];
    steps = newSteps(event);
  }
  if (event.stage === "downloading") {
    addDownloadStep();
    countDownload(event);
    // drawn as in progress (…); a fetch that ended without the package is not drawn done: the
    // start that follows says what npm answered
    if (event.status === "progress" || (event.status === "done" && event.ok === false)) event = Object.assign({}, event, { status: "started" });
  }
  if (event.stage !== "starting" || event.status !== "started") stopWatch();
  var order = steps.order;
  var index = order.indexOf(event.stage);
  for (var i = 0; i < index; i++) setStep(order[i], "done");
  setStep(event.stage, event.status);
  if (event.status === "started") {
    if (event.stage === "starting") { setStep("handshake", "started"); startWatch(event); }
    if (STAGE_BUSY[event.stage]) setBusy(STAGE_BUSY[event.stage]);
  }
  if (event.status === "failed") {
    for (var j = index + 1; j < order.length; j++) setStep(order[j], "pending");
    if (SIGN_IN[event.code]) {
      setStep(event.stage, "sign_in");
      showSignInNeeded(event);
    } else if (OWN_CHOICE[event.code]) {
      setStep(event.stage, "not_allowed");
      steps.block.appendChild(el("p", { class: "own-choice", role: "status", text: OWN_CHOICE[event.code] }));
      noteOwnChoice(OWN_CHOICE[event.code]);
    } else showProblem(event);
    steps = null;
    return;
  }
  if (event.stage === "tools_listed" && event.status === "done") {
    steps.tools = event.tools || [];
    if (steps.action !== INSTALL) {
      steps.block.appendChild(el("p", { class: "small tools-found", text: foundTools(steps.tools) + ":" }));
      steps.block.appendChild(toolList(steps.tools));
      steps = null;
    }
  } else if (event.stage === "connected" && event.status === "done") {
    steps.block.appendChild(el("p", { class: "small", text: "Connected. " + foundTools(steps.tools) + "." }));
    steps = null;
  }
}
