// The "Add MCP server…" pane around the thread: opening and closing it, the goal form that
// starts a run, the registry search pane (each result's "Set up" starts a run), Cancel setup
// and "Set up another server".

import { $, el, showError } from "./dom.js";
import { plain } from "./errors.js";
import { rpc, socketReady } from "./api.js";
import { currentRunId, hasRun, note, resetThread, runDone, sendToAgent, setBusy } from "./thread.js";

var SOURCES = { local: "your local catalog", official: "the official MCP registry", smithery: "Smithery" };
var TYPES = { npm: "npm package", pypi: "Python package", oci: "Docker image", nuget: ".NET package", mcpb: "MCPB bundle", remote: "remote server" };

// What decides the choice, before "Set up": how it runs, the keys it asks for,
// and whether this computer can run it.
function cardFacts(server) {
  var facts = [];
  var types = (server.package_types || []).map(function (t) { return TYPES[t] || t; });
  if (types.length) facts.push(el("span", { class: "fact", "data-fact": "type", text: types.join(" or ") }));
  if (server.key_count === 0) facts.push(el("span", { class: "fact", "data-fact": "keys", text: "No keys needed" }));
  else if (server.key_count > 0) {
    var words = server.key_count === 1 ? "Needs 1 key" : "Needs " + server.key_count + " keys";
    if (server.secret_key_count) words += " (" + server.secret_key_count + " secret)";
    facts.push(el("span", { class: "fact", "data-fact": "keys", text: words }));
  }
  if (server.runs_here === true) {
    var runs = "Runs on this computer" + (server.runs_with ? " with " + server.runs_with : "");
    facts.push(el("span", { class: "fact ok", "data-fact": "runs", text: runs }));
  }
  else if (server.runs_here === false) {
    facts.push(el("span", { class: "fact warn", "data-fact": "runs", text: "Cannot run here yet: " + (server.runs_here_reason || "a runtime is missing") }));
  }
  return facts.length ? el("div", { class: "small facts" }, facts) : null;
}

function openSetup() {
  $("setup").hidden = false;
  $("add-server").setAttribute("aria-expanded", "true");
  if (!hasRun()) $("goal").focus();
  else if (runDone()) $("new-setup").focus();
  else $("cancel-agent").focus();
  $("setup").scrollIntoView({ block: "start", behavior: "smooth" });
}

function closeSetup() {
  $("setup").hidden = true;
  $("add-server").setAttribute("aria-expanded", "false");
  $("add-server").focus();
}

function startRun(goal) {
  goal = (goal || "").trim();
  if (!goal) {
    showError($("goal-error"), "Type what you want to set up, for example “set up the GitHub MCP server”.");
    $("goal").focus();
    return;
  }
  if (!socketReady()) {
    showError($("goal-error"), plain("network"));
    return;
  }
  showError($("goal-error"), "");
  sendToAgent({ type: "start_agent", goal: goal });
}

// The websocket's "error" event: a refused start is shown under the goal field, anything else
// in the running thread.
export function onRunError(event) {
  if (event.code === "invalid_input" || event.code === "agent_busy") showError($("goal-error"), plain(event.code, event.message));
  else if (hasRun() && !runDone()) note(event.message);
}

// "Did you mean …?": the query with its typos corrected (the registries' own words), each a
// button that searches for it.
function didYouMean(result) {
  var readings = result.did_you_mean || [];
  if (!readings.length) return null;
  var parts = ["Did you mean "];
  readings.forEach(function (reading, i) {
    if (i) parts.push(" or ");
    var button = el("button", { type: "button", class: "choice", text: reading, "aria-label": "Search for " + reading });
    button.addEventListener("click", function () {
      $("search").value = reading;
      $("search-form").requestSubmit();
    });
    parts.push(button);
  });
  parts.push("?");
  return el("span", { class: "did-you-mean" }, parts);
}

function searchRegistries(event) {
  event.preventDefault();
  var query = $("search").value.trim();
  var results = $("search-results");
  $("search-button").disabled = true;
  $("search-status").textContent = "Searching…";
  rpc("mcp_setup_search", { query: query, page_size: 20 }).then(function (result) {
    results.textContent = "";
    var servers = result.servers || [];
    var failed = result.errors || [];
    var hint = didYouMean(result);
    var words = servers.length === 1 ? "1 server found." : servers.length + " servers found.";
    if (servers.length === 0) {
      words = failed.length || hint ? "Nothing found." :
        "Nothing found in the server directories or in the local catalog. Try other words.";
    }
    if (failed.length) {  // which directories failed, and why
      words += " Could not search: " + failed.map(function (e) {  // one full stop at the end, not ").);"
        return (SOURCES[e.source] || e.source) + " (" + String(e.message || "").replace(/[.\s]+$/, "") + ")";
      }).join("; ") + ".";
    }
    $("search-status").textContent = words;
    if (hint) $("search-status").append(" ", hint);
    servers.forEach(function (server) {
      var name = server.qualified_name;
      var button = el("button", { type: "button", class: "primary", text: "Set up", "aria-label": "Set up " + name });
      button.addEventListener("click", function () { startRun("set up " + name); });
      results.appendChild(el("li", { class: "result" }, [
        el("div", { class: "result-text" }, [
          el("div", { class: "result-name", text: server.display_name || name }),
          server.display_name && server.display_name !== name ? el("div", { class: "small muted", text: name }) : null,
          server.description ? el("div", { class: "small", text: server.description }) : null,
          cardFacts(server),
          server.source ? el("div", { class: "small muted", text: "From " + (SOURCES[server.source] || server.source) }) : null
        ]),
        button
      ]));
    });
  }, function (err) {
    $("search-status").textContent = "The search did not work. " + err.message;
  }).then(function () { $("search-button").disabled = false; });
}

export function initSetup() {
  $("add-server").addEventListener("click", function () {
    if ($("setup").hidden) openSetup(); else $("goal").focus();
  });
  $("close-setup").addEventListener("click", closeSetup);
  $("goal-form").addEventListener("submit", function (e) { e.preventDefault(); startRun($("goal").value); });
  $("search-form").addEventListener("submit", searchRegistries);
  $("cancel-agent").addEventListener("click", function () {
    $("cancel-agent").disabled = true;
    setBusy("Cancelling…");
    sendToAgent({ type: "cancel_agent", run_id: currentRunId() });
  });
  $("new-setup").addEventListener("click", resetThread);
}
