// A server card's "Settings and recent log" (#25 item 2): every setting by name (the value of a
// non-secret one; a secret is never read back, only replaced, tested first), the server's
// recent log (redacted), and the command that updates it. Loaded when opened (/rpc servers.details).

import { el } from "./dom.js";
import { rpc } from "./api.js";

// "Replace KEY": the secret box opens for the new value; the server is tested with it (/rpc servers.rotate).
// A card's details are drawn again when its server's state changes (a reconnect, a log line): what a
// replace in flight says is kept per server and key, and written to the status line drawn now.
var rotations = {};  // server_id + "\n" + key -> {text, error, busy}

function paint(said, button, state) {
  said.className = "small rotate-status" + (state.error ? " error" : "");
  said.textContent = state.text;
  button.disabled = state.busy;
}

function showRotation(id) {
  document.querySelectorAll(".rotate-status").forEach(function (said) {
    if (said.dataset.rotation === id) paint(said, said.previousSibling, rotations[id]);
  });
}

function replaceButton(d, key) {
  var id = d.server_id + "\n" + key;
  var button = el("button", { type: "button", class: "quiet small-button", text: "Replace", "aria-label": "Replace " + key });
  var said = el("span", { class: "small rotate-status", role: "status" });
  said.dataset.rotation = id;
  if (rotations[id]) paint(said, button, rotations[id]);
  button.addEventListener("click", function () {
    rotations[id] = { text: " Enter the new value in the box; then it is tested…", error: false, busy: true };
    showRotation(id);
    rpc("servers.rotate", { server_id: d.server_id, key: key }).then(function (done) {
      rotations[id] = { text: " ✓ " + done.message, error: false, busy: false };
    }, function (failure) {
      rotations[id] = { error: true, busy: false, text: failure.code === "prompt_cancelled" ? " You cancelled: the old value stays."
        : " " + (failure.detail || failure.message) + " The old value of " + key + " stays." };
    }).then(function () { showRotation(id); });
  });
  return el("span", null, [button, said]);
}

function render(body, d) {
  body.textContent = "";
  var settings = d.settings || [];
  body.appendChild(el("h4", { text: "Settings" }));
  body.appendChild(settings.length ? el("ul", { class: "settings-list" }, settings.map(function (s) {
    return el("li", null, [el("code", { text: s.key }), s.secret ? " — secret, stored encrypted (not shown) "
      : (s.value !== undefined ? [": ", el("code", { class: "setting-value", text: s.value })] : " — not set"),
      s.secret ? replaceButton(d, s.key) : null].flat());
  })) : el("p", { class: "muted small", text: "It has no settings." }));
  if (settings.some(function (s) { return s.secret; })) {
    body.appendChild(el("p", { class: "small muted", text: "Replace tests the server with the new key first; if the test fails, the old key stays." }));
  }
  body.appendChild(el("p", { class: "small" }, ["To update it to the registry's newer version: ",
    el("code", { text: "mcp-setup update " + d.slug })]));
  body.appendChild(el("h4", { text: "Recent log" }));
  var log = d.log || [];
  body.appendChild(log.length ? el("pre", { class: "diff server-log", tabIndex: 0, "aria-label": "Recent log", text: log.join("\n") })
    : el("p", { class: "muted small", text: "Nothing logged yet." }));
}

export function detailsPart(server, open) {
  var body = el("div", { class: "server-more-body" }, [el("p", { class: "muted small", text: "Loading…" })]);
  var part = el("details", { class: "server-more", "data-server": server.server_id }, [
    el("summary", { text: "Settings and recent log", "data-focus-key": "more:" + server.server_id }), body
  ]);
  part.addEventListener("toggle", function () {
    if (!part.open) return;
    rpc("servers.details", { server_id: server.server_id }).then(function (d) { render(body, d); }, function (failure) {
      body.textContent = "";
      body.appendChild(el("p", { class: "error", role: "alert", text: failure.message }));
    });
  });
  if (open) part.open = true;  // kept open across the list's refreshes (it loads again)
  return part;
}
