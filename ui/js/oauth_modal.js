// The sign-in box: an OAuth sign-in asked for by the setup assistant. It names the sign-in
// service's host and the permissions asked for, then offers the link (opened in a new tab).
// The tokens never reach the page: the sign-in service sends the browser back to mcp-setup's
// own loopback listener.

import { $ } from "./dom.js";
import { isThisRun, note } from "./thread.js";

var requests = {}; // server -> the latest sign-in asked for it, shown again by openSignIn

export function onOAuthRequest(event) {
  requests[event.server || ""] = event;
  if (isThisRun(event.run_id)) note("Waiting for you to sign in to " + (event.server || "the server") + "…");
  show(event);
}

function show(event) {
  var dialog = $("oauth-dialog");
  $("oauth-server").textContent = event.server || "this server";
  $("oauth-host").textContent = event.authorization_server || "";
  var scopes = event.scopes || [];
  $("oauth-scopes").textContent = scopes.length ? scopes.join(", ") : "no particular permissions";
  var link = $("oauth-link");
  link.href = event.url;
  link.textContent = "Sign in at " + (event.authorization_server || "the sign-in page");
  if (!dialog.open) dialog.showModal();
  link.focus();
}

// Show a server's sign-in box again (its progress block's "Open the sign-in box", after "Not now").
export function openSignIn(server) {
  var event = requests[server || ""];
  if (event) show(event);
}

export function initOAuthModal() {
  var dialog = $("oauth-dialog");
  $("oauth-link").addEventListener("click", function () { dialog.close(); });
  $("oauth-close").addEventListener("click", function () { dialog.close(); });
}
