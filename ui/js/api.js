// The link to mcp-setup: JSON-RPC over fetch (with this tab's session header), the secret
// endpoint, and the websocket (connection, status line, reconnects, event dispatch).
// The page never holds the per-process token: fetch and the websocket carry the HttpOnly cookie
// set on the first load. A secret is only ever POSTed to /api/secrets/<prompt_id>.

import { $ } from "./dom.js";
import { plain } from "./errors.js";

var sessionId = null; // from the websocket's "hello": ties JSON-RPC calls to this tab
var rpcId = 0;

export function RpcFailure(code, message, detail) {
  this.code = code;
  this.message = message;
  this.detail = detail;
}

export function rpc(method, params) {
  rpcId += 1;
  var headers = { "Content-Type": "application/json" };
  if (sessionId) headers["X-MCP-Setup-Session"] = sessionId;
  return fetch("/rpc", {
    method: "POST",
    headers: headers,
    credentials: "same-origin",
    body: JSON.stringify({ jsonrpc: "2.0", id: rpcId, method: method, params: params || {} })
  }).then(function (response) {
    if (response.status === 403) throw new RpcFailure("forbidden", plain("forbidden"));
    return response.json().catch(function () { throw new RpcFailure("internal", plain("internal")); });
  }, function () {
    throw new RpcFailure("network", plain("network"));
  }).then(function (body) {
    if (body && body.error) {
      var data = body.error.data || {};
      var code = data.code || "internal";
      throw new RpcFailure(code, plain(code, body.error.message), data.message || body.error.message);
    }
    return body.result;
  });
}

// The secret modal's answer ({value} or {cancel: true}), straight to the broker.
export function postConsent(consentId, body) {
  return postSecret(consentId, body, "/api/consents/");
}

export function postSecret(promptId, body, base) {
  return fetch((base || "/api/secrets/") + encodeURIComponent(promptId), {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    credentials: "same-origin",
    body: JSON.stringify(body)
  }).then(function (response) {
    return response.json().catch(function () { return {}; }).then(function (data) {
      if (response.ok && data.ok) return data;
      var code = (data.error && data.error.code) || (response.status === 403 ? "forbidden" : "internal");
      throw new RpcFailure(code, plain(code, data.error && data.error.message), response.status);
    });
  }, function () { throw new RpcFailure("network", plain("network")); });
}

// ---- the websocket ----------------------------------------------------------------------
var socket = null;
var retry = 0;
var handlers = {}; // event type → function(event)

// Handle the websocket events of one type (one handler per type; unknown types are ignored).
export function on(type, handler) {
  handlers[type] = handler;
}

function setConn(state, text) {
  $("conn").dataset.state = state;
  $("conn").textContent = text;
}

export function socketReady() {
  return socket && socket.readyState === WebSocket.OPEN;
}

// Send one message on the websocket; false when it is not open.
export function send(obj) {
  if (!socketReady()) return false;
  socket.send(JSON.stringify(obj));
  return true;
}

export function connect() {
  var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
  socket = new WebSocket(scheme + window.location.host + "/ws");
  socket.addEventListener("open", function () {
    retry = 0;
    setConn("open", "Connected");
  });
  socket.addEventListener("message", function (e) {
    var event;
    try { event = JSON.parse(e.data); } catch (err) { return; }
    if (event.type === "hello") sessionId = event.session_id;
    var handler = handlers[event.type];
    if (handler) handler(event);
  });
  socket.addEventListener("close", function () {
    setConn("closed", "Not connected — retrying…");
    sessionId = null;
    retry = Math.min(retry + 1, 5);
    setTimeout(connect, 500 * retry * retry);
  });
}
