// A server card's Network part: where the server may connect now, where it connected during its
// test (stored at install), and the one step between the two policies: "Allow only these" (any
// other destination refused) or back to the public internet, the default (/rpc servers.network,
// as `mcp-setup allow NAME --only-tested` / `--public-internet`). The server restarts under it.

import { el, showError } from "./dom.js";
import { rpc } from "./api.js";

function listed(destinations) {
  var out = [];
  destinations.forEach(function (d, i) {
    if (i) out.push(", ");
    out.push(el("code", { text: d }));
  });
  return out;
}

function testedLine(net) {
  if (net.tested === null || net.tested === undefined) return null;  // not tested through mcp-setup's proxy
  if (!net.tested.length) return el("p", { class: "net-tested", text: "During the test it connected to nothing on the network." });
  return el("p", { class: "net-tested" }, ["During the test it connected to "].concat(listed(net.tested), ["."]));
}

function policyLine(net) {
  if (net.mode === "none") return el("p", { class: "net-policy", text: "It has no network (you chose that when you approved it)." });
  if (net.mode === "strict") {
    var allowed = net.allowed || [];
    var only = net.only.filter(function (d) { return allowed.indexOf(d) < 0; });  // allowed ones: their own line
    var refused = " Anything else it tries is refused, and you are told.";
    if (!only.length) return el("p", { class: "net-policy", text: "It may connect only to what you allowed (below)." + refused });
    return el("p", { class: "net-policy" }, ["It may connect only to these: "].concat(listed(only), ["." + refused]));
  }
  return el("p", { class: "net-policy", text: "It may connect to the public internet, not to this computer or your local network." });
}

// onChanged: the list is drawn again (the card shows the new policy and the server's restart).
export function networkPart(server, itemError, onChanged) {
  var net = server.network;
  if (!net) return null;  // a remote, a container, a server serving HTTP here: not held by mcp-setup's proxy
  var name = server.title || server.qualified_name || server.server_id;
  var step = null;
  var terminal = null;
  if (net.may_hold_to_tested || net.mode === "strict") {
    var only = net.may_hold_to_tested;
    step = el("button", { type: "button", class: "small-button net-choice",
      text: only ? "Allow only these" : "Back to the default: the public internet",
      "aria-label": only ? "Allow " + name + " to connect only to what it connected to during its test"
                         : "Let " + name + " connect to the public internet again",
      "data-focus-key": "network:" + server.server_id });
    step.addEventListener("click", function () {
      if (step.getAttribute("aria-disabled") === "true") return;  // not `disabled`: focus stays on it
      step.setAttribute("aria-disabled", "true");
      showError(itemError, "");
      rpc("servers.network", { server_id: server.server_id, only_tested: only }).then(onChanged, function (err) {
        step.removeAttribute("aria-disabled");
        showError(itemError, "Could not change where it may connect. " + err.message);
      });
    });
    terminal = el("p", { class: "small muted net-terminal" }, [
      only ? "Then anything else it tries is refused, and you are told with the one step that allows it. " : "",
      "In a terminal: ",
      el("code", { text: "mcp-setup allow " + server.slug + (only ? " --only-tested" : " --public-internet") })]);
  }
  return el("div", { class: "network-part small", "data-server": server.server_id, "data-mode": net.mode }, [
    el("h4", { text: "Network" }),
    testedLine(net),
    policyLine(net),
    net.held === false ? el("p", { class: "net-unheld", text: "Nothing enforces this on this system (no network " +
      "sandbox here): your choice is kept for when one runs." }) : null,
    net.allowed && net.allowed.length ? el("p", { class: "net-allowed" }, ["You also allowed: "].concat(listed(net.allowed), ["."])) : null,
    step,
    terminal
  ]);
}
