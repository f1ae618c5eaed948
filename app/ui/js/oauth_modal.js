// The sign-in box: an OAuth sign-in asked for by the setup assistant. It names the sign-in
// service's host and the permissions asked for, then offers the link (opened in a new tab).
// The tokens never reach the page: the sign-in service sends the browser back to mcp-setup's
// own loopback listener.

import { $ } from "./dom.js";
import { isThisRun, note } from "./thread.js";

var last = null; // the latest sign-in asked for, shown again by openSignIn

export function onOAuthRequest(event) {
  last = event;
  var dialog = $("oauth-dialog");
  $("oauth-server").textContent = event.server || "this server";
  $("oauth-host").textContent = event.authorization_server || "";
  var scopes = event.scopes || [];
  $("oauth-scopes").textContent = scopes.length ? scopes.join(", ") : "no particular permissions";
  var link = $("oauth-link");
  link.href = event.url;
  link.textContent = "Sign in at " + (event.authorization_server || "the sign-in page");
  if (isThisRun(event.run_id)) note("Waiting for you to sign in to " + (event.server || "the server") + "…");
  if (!dialog.open) dialog.showModal();
  link.focus();
}

// Show the latest sign-in box again (the progress block's "Open the sign-in box", after "Not now").
export function openSignIn() {
  if (!last) return;
  var dialog = $("oauth-dialog");
  if (!dialog.open) dialog.showModal();
  $("oauth-link").focus();
}

export function initOAuthModal() {
  var dialog = $("oauth-dialog");
  $("oauth-link").addEventListener("click", function () { dialog.close(); });
  $("oauth-close").addEventListener("click", function () { dialog.close(); });
}
