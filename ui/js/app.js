// mcp-setup web UI: start-up. Native ES modules, no build step, no external code (CSP
// script-src 'self'). This module wires the parts together: each websocket event to the part
// that shows it, the page's controls, then the websocket itself.
//   dom.js · errors.js · api.js (fetch, JSON-RPC, websocket) · servers.js (installed list)
//   thread.js (conversation) · progress.js (test/install steps) · setup.js (the pane, search)
//   clients.js (connect an AI client) · secret_modal.js (the key box) · consent_modal.js (approve what runs, where secrets go)
//   oauth_modal.js (the sign-in box) · relayed_modal.js (an installed server's own request, framed as its)
//   try_tool.js (run a tool from its card) · consent_choices.js (the consent's choices)
//   clients.js (the AI clients section: connect a client) · secret_modal.js (the key box) · consent_modal.js (approve what runs, where secrets go)
//   oauth_modal.js (the sign-in box) · budget.js (the context budget under the installed servers)

import { on, connect } from "./api.js";
import { $, showError } from "./dom.js";
import { loadServers, loadServersSoon } from "./servers.js";
import { onUpdateProgress } from "./server_card.js";
import { beginThread, isThisRun, message, onDone, onQuestion, onQuestionClosed } from "./thread.js";
import { offerSignIn, onProgress } from "./progress.js";
import { initSetup, onRunError } from "./setup.js";
import { initSecretModal, onSecretDone, onSecretRequest } from "./secret_modal.js";
import { initConsentModal, onConsentDone, onConsentRequest } from "./consent_modal.js";
import { initOAuthModal, onOAuthRequest } from "./oauth_modal.js";
import { initRelayedModal, onRelayedDone, onRelayedRequest } from "./relayed_modal.js";
import { onTryNotice } from "./try_tool.js";
import { initClientsSection } from "./clients.js";
import { initBudget, loadBudget } from "./budget.js";

// Drop ?t=<token> from the address bar and history (the cookie now carries it).
if (window.location.search.indexOf("t=") !== -1) {
  window.history.replaceState(null, "", "/");
}

// Events about a run are shown only for this page's own run (calls outside it are not shown).
function forThisRun(handler) {
  return function (event) { if (isThisRun(event.run_id)) handler(event); };
}

on("hello", function () { loadServers(); loadBudget(); });
on("agent_started", function (event) { beginThread(event.run_id, event.goal); });
on("agent_message", forThisRun(function (event) { message("agent", "Assistant", event.text); }));
on("agent_question", forThisRun(onQuestion));
on("question_closed", onQuestionClosed);
on("agent_done", forThisRun(onDone));
on("progress", function (event) { if (isThisRun(event.run_id)) onProgress(event); else onUpdateProgress(event); });
on("secret_request", onSecretRequest);
on("secret_done", onSecretDone);
on("consent_request", onConsentRequest);
on("consent_done", onConsentDone);
on("relayed_request", onRelayedRequest);
on("relayed_done", onRelayedDone);
on("relayed_notice", onTryNotice);
on("oauth_request", function (event) { onOAuthRequest(event); offerSignIn(event); });
on("server_status", function () { loadServersSoon(); });
on("servers_changed", function () { loadServersSoon(); loadBudget(); });  // a budget saved elsewhere too
on("guard_lockout", function () {
  showError($("servers-error"), "An assistant sent values that mcp-setup protects (your keys) to an installed " +
    "server several times, which looks like guessing. Its calls to installed servers are blocked until it reconnects.");
});
on("error", onRunError);

document.addEventListener("DOMContentLoaded", function () {
  initSetup();
  initSecretModal();
  initConsentModal();
  initOAuthModal();
  initRelayedModal();
  initClientsSection();
  initBudget();
  connect();
});
