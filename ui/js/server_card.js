// A server card's "Settings and recent log" (#25 item 2): every setting by name (the value of a
// non-secret one; a secret is never read back, only replaced, tested first), its version with
// "Update" when the registry has a newer one, and the server's recent log (redacted). Loaded when
// opened (/rpc servers.details, servers.update_check).

import { el } from "./dom.js";
import { rpc } from "./api.js";
import { STAGE_BUSY } from "./progress.js";

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

// "Update to X": the registry's version is looked up once when the part first opens; a newer one is
// tested with the stored settings and swapped in only if it answers, after the person approves it
// in the consent box (/rpc servers.update, the core call `mcp-setup update` makes). Kept per slug
// (an update gives the server a new id, not a new slug), so the outcome survives the redraw.
var updates = {};  // slug -> {text, error, busy, offer?, name}

function paintInto(said, button, state) {
  said.className = "small update-status" + (state.error ? " error" : "");
  said.textContent = state.text;
  button.hidden = !state.offer;
  button.disabled = state.busy;
  if (state.offer) {
    button.textContent = "Update to " + state.offer;
    button.setAttribute("aria-label", "Update " + state.name + " to " + state.offer);
  }
}

function paintUpdate(slug) {
  document.querySelectorAll(".update-status").forEach(function (said) {
    if (said.dataset.update === slug) paintInto(said, said.nextElementSibling, updates[slug]);
  });
}

function check(d, name) {
  updates[d.slug] = { text: "Looking for a newer version…", busy: true, name: name };
  rpc("servers.update_check", { server_id: d.server_id }).then(function (found) {
    updates[d.slug] = found.newer
      ? { text: "Version " + found.latest + " is available (this is " + found.installed + ").", offer: found.latest, busy: false, name: name }
      : { text: "Version " + found.installed + ", the registry's latest.", busy: false, name: name };
  }, function (failure) {
    updates[d.slug] = { text: "Could not look for a newer version: " + failure.message, error: true, busy: false, name: name };
  }).then(function () { paintUpdate(d.slug); });
}

// A stage of an update in flight, as its status line: from its start on (its lookup and download
// come before the consent box, whose words stay until the person has answered).
export function onUpdateProgress(event) {
  Object.keys(updates).forEach(function (slug) {
    var state = updates[slug];
    if (state.busy && state.offer && state.name === event.server && event.status === "started" &&
        STAGE_BUSY[event.stage] && event.stage !== "resolving" && event.stage !== "downloading") {
      state.text = "Updating to " + state.offer + ": " + STAGE_BUSY[event.stage];
      paintUpdate(slug);
    }
  });
}

function update(d, name) {
  var offer = updates[d.slug].offer;
  updates[d.slug] = { text: "Updating to " + offer + ": approve it in the box that opens. It is tested before it " +
    "replaces the installed version, which keeps working until then.", busy: true, offer: offer, name: name };
  paintUpdate(d.slug);
  rpc("servers.update", { server_id: d.server_id }).then(function (done) {
    updates[d.slug] = { text: (done.updated ? "✓ " : "") + done.message, busy: false, name: name };
  }, function (failure) {
    var denied = failure.code === "consent_denied";  // the person's own choice, not a failure
    updates[d.slug] = { error: !denied, busy: false, offer: offer, name: name,
      text: denied ? "You did not allow it. Nothing was run, and the installed version stays." : (failure.detail || failure.message) };
  }).then(function () { paintUpdate(d.slug); });
}

function updateLine(d, name) {
  var said = el("span", { class: "small update-status", role: "status" });
  said.dataset.update = d.slug;
  var button = el("button", { type: "button", class: "small-button", hidden: true });
  button.addEventListener("click", function () { update(d, name); });
  if (!updates[d.slug]) check(d, name);
  paintInto(said, button, updates[d.slug]);
  return el("p", { class: "small update-line" }, [said, " ", button]);
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
