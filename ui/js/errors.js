// Error codes → plain sentences. The core's error codes (JSON-RPC `error.data.code`, the
// secret endpoint's `error.code`, progress events' `code`) become words a person understands.

var PLAIN = {
  rejected: "The server refused the settings it was given. Usually a key is wrong, expired or lacks a permission.",
  timeout: "The server took too long to answer.",
  runtime_missing: "This server needs a program that is not installed on this computer (such as Node.js, uv or Docker).",
  command_not_found: "The program that runs this server could not be found on this computer.",
  exited: "The server stopped right after it started.",
  protocol_error: "The server answered in a way mcp-setup does not understand.",
  unreachable: "The server could not be reached.",
  download_failed: "The server's package could not be downloaded. Check the internet connection (or the proxy), then try again.",
  download_timeout: "Downloading the server's package took too long. Check the internet connection, then try again.",
  secret_pending: "A key you were asked for has not been entered yet.",
  secret_missing: "A key is missing or was already used. Please enter it again.",
  secret_expired: "The key you entered has expired (they are kept only for a while). Please enter it again.",
  secret_wrong_key: "A key was given for the wrong setting.",
  secret_not_allowed: "A secret was passed in the open; it must be entered in the secret box instead.",
  prompt_cancelled: "You cancelled entering the key.",
  consent_denied: "You did not allow it. Nothing was run.",
  consent_required: "It waits for your approval: the approval box opens in this page.",
  prompt_not_found: "This request for a key has expired or was already closed.",
  prompt_answered: "This key was already entered.",
  oauth_required: "This server needs you to sign in with your account first.",
  needs_sign_in: "The sign-in to this server no longer works: sign in again.",
  already_installed: "This server is already installed.",
  not_found: "mcp-setup could not find that server.",
  registry_unavailable: "A server directory could not be reached. Check your internet connection and try again.",
  registry_auth: "A server directory refused mcp-setup's access key.",
  no_runnable_package: "This server cannot run on this computer: none of its packages has the program it needs.",
  package_not_found: "That way of running this server is not offered.",
  bundle_invalid: "The server's download is damaged or not what was expected.",
  invalid_input: "Something in the request was not right.",
  agent_busy: "A setup is already running in this page.",
  agent_unavailable: "The setup assistant is not available in this version.",
  forbidden: "This page lost its access key. Open the link printed by mcp-setup again.",
  network: "mcp-setup is not answering. Is it still running?",
  internal: "Something went wrong inside mcp-setup. The log in its terminal has details."
};

export function plain(code, fallback) {
  return PLAIN[code] || fallback || PLAIN.internal;
}
