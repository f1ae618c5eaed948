// The context budget under the installed servers: where it stands ("Tool definitions listed to AI
// clients: 6,100 of 8,000 tokens; 12 tools reachable through mcp_setup_find_tools"), and the
// person's own value, saved for every mcp-setup on this computer (app/web/budget_rpc.py).

import { $, showError } from "./dom.js";
import { rpc } from "./api.js";

function render(standing) {
  $("budget").hidden = false;
  $("budget-standing").textContent = standing.words + ".";
  $("budget-source").textContent = standing.source_words;
  var input = $("budget-tokens");
  if (document.activeElement !== input) input.value = String(standing.budget);
}

export function loadBudget() {
  return rpc("tools_budget.get", {}).then(render, function (err) {
    showError($("budget-error"), "Could not read the context budget. " + err.message);
  });
}

export function initBudget() {
  $("budget-form").addEventListener("submit", function (event) {
    event.preventDefault();
    var text = $("budget-tokens").value.trim();
    var tokens = Number(text);
    if (!/^\d+$/.test(text) || tokens > 1000000) {
      showError($("budget-error"), "The budget is a whole number of tokens from 0 (no budget: every tool is listed) to 1,000,000.");
      $("budget-tokens").focus();
      return;
    }
    showError($("budget-error"), "");
    $("budget-save").disabled = true;
    rpc("tools_budget.set", { tokens: tokens }).then(render, function (err) {
      showError($("budget-error"), "Could not save the budget. " + err.message);
    }).then(function () { $("budget-save").disabled = false; });
  });
}
