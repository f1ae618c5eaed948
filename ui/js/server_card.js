// A server card's "Settings and recent log": every setting by name (the value of a
// non-secret one; a secret is never read back, only replaced, tested first), its version with
// "Update" when the registry has a newer one, and the server's recent log (redacted). Loaded when
// opened (/rpc servers.details, servers.update_check).

import { el } from "./dom.js";
import { rpc } from "./api.js";
import { STAGE_BUSY } from "./progress.js";

// A card's details are drawn again when its server's state changes (a reconnect, a log line, an
// update's new id): what a Replace or an Update in flight says is kept by its id here and written
// to the status line drawn now (each status line carries that id as data-kept).
var kept = {};  // "rotate\n" + server_id + "\n" + key, or "update\n" + slug -> {text, error, busy, …}

function repaint(id, paint) {
  document.querySelectorAll("[data-kept]").forEach(function (said) {
    if (said.dataset.kept === id) paint(said, kept[id]);
  });
}

// "Replace KEY": the secret box opens for the new value; the server is tested with it (/rpc servers.rotate).
function paintRotation(said, state) {  // its button is just before it
  said.className = "small rotate-status" + (state.error ? " error" : "");
  said.textContent = state.text;
  said.previousSibling.disabled = state.busy;
}

function replaceButton(d, key) {
  var id = "rotate\n" + d.server_id + "\n" + key;
  var button = el("button", { type: "button", class: "quiet small-button", text: "Replace", "aria-label": "Replace " + key });
  var said = el("span", { class: "small rotate-status", role: "status" });
  said.dataset.kept = id;
  var part = el("span", null, [button, said]);
  if (kept[id]) paintRotation(said, kept[id]);
  button.addEventListener("click", function () {
    kept[id] = { text: " Enter the new value in the box; then it is tested…", error: false, busy: true };
    repaint(id, paintRotation);
    rpc("servers.rotate", { server_id: d.server_id, key: key }).then(function (done) {
      kept[id] = { text: " ✓ " + done.message, error: false, busy: false };
    }, function (failure) {
      kept[id] = { error: true, busy: false, text: failure.code === "prompt_cancelled" ? " You cancelled: the old value stays."
        : " " + (failure.detail || failure.message) + " The old value of " + key + " stays." };
    }).then(function () { repaint(id, paintRotation); });
  });
  return part;
}

// "Update to X": the registry's version is looked up once when the part first opens; a newer one is
// tested with the stored settings and swapped in only if it answers, after the person approves it
// in the consent box (/rpc servers.update, the core call `mcp-setup update` makes). Kept per slug
// (an update gives the server a new id, not a new slug).
function paintUpdate(said, state) {  // its button is just after it
  var button = said.nextElementSibling;
  said.className = "small update-status" + (state.error ? " error" : "");
  said.textContent = state.text;
  button.hidden = !state.offer;
  button.disabled = state.busy;
  if (state.offer) {
    button.textContent = "Update to " + state.offer;
    button.setAttribute("aria-label", "Update " + state.name + " to " + state.offer);
  }
}

function updateId(d) { return "update\n" + d.slug; }

function check(d, name) {
  var id = updateId(d);
  kept[id] = { text: "Looking for a newer version…", busy: true, name: name };
  rpc("servers.update_check", { server_id: d.server_id }).then(function (found) {
    kept[id] = found.newer
      ? { text: "Version " + found.latest + " is available (this is " + found.installed + ").", offer: found.latest, busy: false, name: name }
      : { text: "Version " + found.installed + ", the registry's latest.", busy: false, name: name };
  }, function (failure) {
    kept[id] = { text: "Could not look for a newer version: " + failure.message, error: true, busy: false, name: name };
  }).then(function () { repaint(id, paintUpdate); });
}

// A stage of an update in flight, as its status line: from its start on (its lookup and download
// come before the consent box, whose words stay until the person has answered).
export function onUpdateProgress(event) {
  Object.keys(kept).forEach(function (id) {
    var state = kept[id];
    if (state.busy && state.offer && state.name === event.server && event.status === "started" &&
        STAGE_BUSY[event.stage] && event.stage !== "resolving" && event.stage !== "downloading") {
      state.text = "Updating to " + state.offer + ": " + STAGE_BUSY[event.stage];
      repaint(id, paintUpdate);
    }
  });
}

function update(d, name) {
  var id = updateId(d);
  var offer = kept[id].offer;
  kept[id] = { text: "Updating to " + offer + ": approve it in the box that opens. It is tested before it " +
    "replaces the installed version, which keeps working until then.", busy: true, offer: offer, name: name };
  repaint(id, paintUpdate);
  rpc("servers.update", { server_id: d.server_id }).then(function (done) {
    kept[id] = { text: (done.updated ? "✓ " : "") + done.message, busy: false, name: name };
  }, function (failure) {
    var denied = failure.code === "consent_denied";  // the person's own choice, not a failure
    kept[id] = { error: !denied, busy: false, offer: offer, name: name,
      text: denied ? "You did not allow it. Nothing was run, and the installed version stays." : (failure.detail || failure.message) };
  }).then(function () { repaint(id, paintUpdate); });
}

function updateLine(d, name) {
  var id = updateId(d);
  var said = el("span", { class: "small update-status", role: "status" });
  said.dataset.kept = id;
  var button = el("button", { type: "button", class: "small-button", hidden: true });
  button.addEventListener("click", function () { update(d, name); });
  if (!kept[id]) check(d, name);
  var line = el("p", { class: "small update-line" }, [said, " ", button]);
  paintUpdate(said, kept[id]);
  return line;
}

function render(body, d, name) {
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
  body.appendChild(el("h4", { text: "Version" }));
  body.appendChild(updateLine(d, name));
  body.appendChild(el("h4", { text: "Recent log" }));
  var log = d.log || [];
  body.appendChild(log.length ? el("pre", { class: "diff server-log", tabIndex: 0, "aria-label": "Recent log", text: log.join("\n") })
    : el("p", { class: "muted small", text: "Nothing logged yet." }));
}

export function detailsPart(server, open) {
  var body = el("div", { class: "server-more-body" }, [el("p", { class: "muted small", text: "Loading…" })]);
  var part = el("details", { class: "server-more", "data-server": server.server_id, "data-slug": server.slug }, [
    el("summary", { text: "Settings, version and recent log", "data-focus-key": "more:" + server.server_id }), body
  ]);
  part.addEventListener("toggle", function () {
    if (!part.open) return;
    rpc("servers.details", { server_id: server.server_id }).then(function (d) {
      render(body, d, server.qualified_name);
    }, function (failure) {
      body.textContent = "";
      body.appendChild(el("p", { class: "error", role: "alert", text: failure.message }));
    });
  });
  if (open) part.open = true;  // kept open across the list's refreshes (it loads again)
  return part;
}
