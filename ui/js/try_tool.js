// "Try" on a server card's tool: the person runs the tool from the page with the inputs they
// type (JSON), and sees its answer, and any notice of mcp-setup's about it (a form it refused). The page is the tool's client, so a form or page the server
// asks for meanwhile opens in this tab, framed as the server's (relayed_modal.js). /rpc servers.try_tool.

import { el, showError } from "./dom.js";
import { rpc } from "./api.js";

var running = null;  // the error line of the tool running now: where mcp-setup's notices go

// mcp-setup's own notice during a tool run from the page (a server's form it refused, and why),
// in mcp-setup's voice under that tool.
export function onTryNotice(event) {
  if (running) showError(running, event.text);
}

function resultText(result) {
  return (result.content || []).map(function (block) {
    return block.type === "text" ? block.text : "[" + block.type + "]";
  }).join("\n") || JSON.stringify(result.structuredContent || {});
}

export function tryPart(server, tool) {
  var name = server.slug + "__" + tool.name;
  var inputs = el("textarea", { class: "try-inputs", rows: 2, "aria-label": "Inputs for " + tool.name + " (JSON)" });
  inputs.value = "{}";
  inputs.spellcheck = false;
  var run = el("button", { type: "button", class: "small-button", text: "Run", "aria-label": "Run " + tool.name });
  var said = el("pre", { class: "try-result", role: "status", hidden: true });
  var error = el("p", { class: "error", role: "alert", hidden: true });
  run.addEventListener("click", function () {
    var args;
    try { args = JSON.parse(inputs.value || "{}"); } catch (err) {
      showError(error, "The inputs are not JSON: write them as {\"name\": \"value\"}.");
      return;
    }
    showError(error, "");
    running = error;
    run.disabled = true;
    said.hidden = false;
    said.textContent = "Running…";
    rpc("servers.try_tool", { name: name, arguments: args }).then(function (result) {
      said.textContent = (result.isError ? "It answered with an error: " : "") + resultText(result);
    }, function (failure) {
      said.hidden = true;
      showError(error, failure.message);
    }).then(function () {
      run.disabled = false;
      if (running === error) running = null;
    });
  });
  var body = el("div", { class: "try-body", hidden: true }, [
    el("label", { class: "small", text: "Inputs (JSON)" }), inputs, run, error, said
  ]);
  var open = el("button", { type: "button", class: "quiet small-button try-open", text: "Try",
                            "aria-label": "Try " + tool.name, "aria-expanded": "false" });
  open.addEventListener("click", function () {
    body.hidden = !body.hidden;
    open.setAttribute("aria-expanded", body.hidden ? "false" : "true");
    if (!body.hidden) inputs.focus();
  });
  return el("div", { class: "try", "data-tool": tool.name }, [open, body]);
}
