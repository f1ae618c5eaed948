// mcp-setup web UI. Plain script, no build step, no external code. The page never holds the
// per-process token: fetch and the websocket carry the HttpOnly cookie set on the first load.
// A secret typed in the modal is POSTed to /api/secrets/<prompt_id> and the field is cleared;
// it is never sent over the websocket nor kept in the page.
(function () {
  "use strict";

  // Drop ?t=<token> from the address bar and history (the cookie now carries it).
  if (window.location.search.indexOf("t=") !== -1) {
    window.history.replaceState(null, "", "/");
  }

  var $ = function (id) { return document.getElementById(id); };

  // ---- plain words for the core's error codes ------------------------------------------
  var PLAIN = {
    rejected: "The server refused the settings it was given. Usually a key is wrong, expired or lacks a permission.",
    timeout: "The server took too long to answer.",
    runtime_missing: "This server needs a program that is not installed on this computer (such as Node.js, uv or Docker).",
    command_not_found: "The program that runs this server could not be found on this computer.",
    exited: "The server stopped right after it started.",
    protocol_error: "The server answered in a way mcp-setup does not understand.",
    unreachable: "The server could not be reached.",
    secret_pending: "A key you were asked for has not been entered yet.",
    secret_missing: "A key is missing or was already used. Please enter it again.",
    secret_expired: "The key you entered has expired (they are kept only for a while). Please enter it again.",
    secret_wrong_key: "A key was given for the wrong setting.",
    secret_not_allowed: "A secret was passed in the open; it must be entered in the secret box instead.",
    prompt_cancelled: "You cancelled entering the key.",
    prompt_not_found: "This request for a key has expired or was already closed.",
    prompt_answered: "This key was already entered.",
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

  function plain(code, fallback) {
    return PLAIN[code] || fallback || PLAIN.internal;
  }

  // ---- small DOM helpers --------------------------------------------------------------
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (key) {
        var value = attrs[key];
        if (value === null || value === undefined || value === false) return;
        if (key === "class") node.className = value;
        else if (key === "text") node.textContent = value;
        else if (key.indexOf("data-") === 0 || key.indexOf("aria-") === 0 || key === "role" || key === "type" ||
                 key === "for" || key === "id" || key === "name" || key === "autocomplete" || key === "maxlength")
          node.setAttribute(key, value === true ? "" : String(value));
        else node[key] = value;
      });
    }
    (children || []).forEach(function (child) {
      if (child === null || child === undefined) return;
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  function showError(node, text) {
    node.textContent = text || "";
    node.hidden = !text;
  }

  // ---- JSON-RPC -----------------------------------------------------------------------
  var sessionId = null;
  var rpcId = 0;

  function RpcFailure(code, message, detail) {
    this.code = code;
    this.message = message;
    this.detail = detail;
  }

  function rpc(method, params) {
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

  // ---- installed servers --------------------------------------------------------------
  var STATUS_WORDS = { connected: "Connected", connecting: "Starting…", failed: "Not working", stopped: "Stopped" };

  function installedByWords(label) {
    if (!label) return "unknown";
    if (label === "ui") return "you, in this page";
    if (label === "agent") return "the setup assistant";
    if (label.indexOf("mcp:") === 0) return label.slice(4).replace(/-/g, " ") + " (through MCP)";
    return label;
  }

  function toolList(tools) {
    return el("ul", { class: "tool-list" }, tools.map(function (tool) {
      return el("li", null, [
        el("span", { class: "tool-name", text: tool.name || "?" }),
        tool.description ? " — " + tool.description : ""
      ]);
    }));
  }

  function renderServers(servers) {
    var list = $("servers");
    var active = document.activeElement;
    var focusKey = active && list.contains(active) ? active.getAttribute("data-focus-key") : null;
    var open = {};
    Array.prototype.forEach.call(list.querySelectorAll("details[open]"), function (d) { open[d.dataset.server] = true; });
    list.textContent = "";
    $("servers-empty").hidden = servers.length > 0;
    servers.forEach(function (server) {
      var name = server.qualified_name || server.server_id;
      var tools = server.tools || [];
      var status = server.status || "stopped";
      var itemError = el("p", { class: "error", role: "alert", hidden: true });
      var when = server.installed_at ? new Date(server.installed_at) : null;
      var details = null;
      if (tools.length) {
        details = el("details", { class: "tools", "data-server": server.server_id }, [
          el("summary", { text: tools.length === 1 ? "1 tool" : tools.length + " tools", "data-focus-key": "tools:" + server.server_id }),
          toolList(tools)
        ]);
        if (open[server.server_id]) details.open = true;
      }
      var reconnect = el("button", { type: "button", text: "Reconnect", "aria-label": "Reconnect " + name,
                                     "data-focus-key": "reconnect:" + server.server_id });
      var remove = el("button", { type: "button", class: "danger", text: "Remove", "aria-label": "Remove " + name,
                                  "data-focus-key": "remove:" + server.server_id });
      reconnect.addEventListener("click", function () {
        // Not `disabled`: that would drop keyboard focus; the list refresh keeps it on this button.
        if (reconnect.getAttribute("aria-disabled") === "true") return;
        showError(itemError, "");
        reconnect.setAttribute("aria-disabled", "true");
        rpc("servers.reconnect", { server_id: server.server_id }).then(loadServers, function (err) {
          reconnect.removeAttribute("aria-disabled");
          showError(itemError, "Could not reconnect it. " + err.message);
        });
      });
      remove.addEventListener("click", function () {
        confirmRemove(name).then(function (yes) {
          if (!yes) { remove.focus(); return; }
          showError(itemError, "");
          remove.disabled = true;
          rpc("servers.remove", { server_id: server.server_id }).then(function () {
            return loadServers().then(function () { $("add-server").focus(); });
          }, function (err) {
            remove.disabled = false;
            showError(itemError, "Could not remove it. " + err.message);
          });
        });
      });
      var item = el("li", { class: "server", "data-server-id": server.server_id, "data-status": status }, [
        el("div", { class: "server-head" }, [
          el("h3", { class: "server-name", text: name }),
          el("span", { class: "badge " + status, text: STATUS_WORDS[status] || status })
        ]),
        el("p", { class: "meta", text: "Installed by " + installedByWords(server.installed_by) +
          (when && !isNaN(when) ? " on " + when.toLocaleString() : "") +
          (server.version ? " · version " + server.version : "") }),
        status === "failed" && server.reason ? el("p", { class: "error", text: "Problem: " + server.reason }) : null,
        details || el("p", { class: "muted small", text: status === "connected" ? "No tools." : "Tools appear once it is connected." }),
        el("div", { class: "row" }, [reconnect, remove]),
        itemError
      ]);
      list.appendChild(item);
    });
    if (focusKey) { // a refresh must not throw keyboard users out of the list
      var again = list.querySelector('[data-focus-key="' + focusKey.replace(/"/g, "") + '"]');
      if (again) again.focus();
    }
  }

  function loadServers() {
    return rpc("servers.list", {}).then(function (result) {
      showError($("servers-error"), "");
      renderServers(result.servers || []);
    }, function (err) {
      showError($("servers-error"), "Could not load the installed servers. " + err.message);
    });
  }

  var reloadTimer = null;
  function loadServersSoon() {
    if (reloadTimer) clearTimeout(reloadTimer);
    reloadTimer = setTimeout(function () { reloadTimer = null; loadServers(); }, 150);
  }

  // ---- confirm dialog -----------------------------------------------------------------
  function confirmRemove(name) {
    var dialog = $("confirm-dialog");
    $("confirm-text").textContent = "“" + name + "” will be stopped and its saved settings and keys deleted from this computer.";
    return new Promise(function (resolve) {
      var settled = false;
      function done(answer) {
        if (settled) return;
        settled = true;
        $("confirm-yes").removeEventListener("click", yes);
        $("confirm-no").removeEventListener("click", no);
        dialog.removeEventListener("cancel", esc);
        dialog.removeEventListener("close", closed);
        if (dialog.open) dialog.close();
        resolve(answer);
      }
      function yes() { done(true); }
      function no() { done(false); }
      function esc(event) { event.preventDefault(); done(false); }
      function closed() { done(false); }
      $("confirm-yes").addEventListener("click", yes);
      $("confirm-no").addEventListener("click", no);
      dialog.addEventListener("cancel", esc);
      dialog.addEventListener("close", closed);
      dialog.showModal();
      $("confirm-no").focus();
    });
  }

  // ---- the setup pane and the thread --------------------------------------------------
  var run = null; // {id, done}
  var steps = null; // the current test/install steps block
  var questionNodes = {};

  function openSetup() {
    $("setup").hidden = false;
    $("add-server").setAttribute("aria-expanded", "true");
    if (!run) $("goal").focus();
    else if (run.done) $("new-setup").focus();
    else $("cancel-agent").focus();
    $("setup").scrollIntoView({ block: "start", behavior: "smooth" });
  }

  function closeSetup() {
    $("setup").hidden = true;
    $("add-server").setAttribute("aria-expanded", "false");
    $("add-server").focus();
  }

  function resetSetup() {
    run = null;
    steps = null;
    questionNodes = {};
    $("thread").textContent = "";
    $("thread-area").hidden = true;
    $("start-area").hidden = false;
    $("busy").hidden = true;
    $("new-setup").hidden = true;
    $("cancel-agent").hidden = false;
    $("cancel-agent").disabled = false;
    $("goal").value = "";
    showError($("goal-error"), "");
    $("goal").focus();
  }

  function addToThread(node) {
    $("thread").appendChild(node);
    node.scrollIntoView({ block: "nearest" });
    return node;
  }

  function message(kind, who, text) {
    return addToThread(el("li", { class: "msg " + kind }, [el("span", { class: "who", text: who }), text]));
  }

  function note(text) {
    return addToThread(el("li", { class: "msg note", text: text }));
  }

  function startRun(goal) {
    goal = (goal || "").trim();
    if (!goal) {
      showError($("goal-error"), "Type what you want to set up, for example “set up the GitHub MCP server”.");
      $("goal").focus();
      return;
    }
    if (!socketReady()) {
      showError($("goal-error"), plain("network"));
      return;
    }
    showError($("goal-error"), "");
    send({ type: "start_agent", goal: goal });
  }

  function beginThread(runId, goal) {
    run = { id: runId, done: false };
    steps = null;
    questionNodes = {};
    $("setup").hidden = false;
    $("add-server").setAttribute("aria-expanded", "true");
    $("start-area").hidden = true;
    $("thread-area").hidden = false;
    $("thread").textContent = "";
    $("new-setup").hidden = true;
    $("cancel-agent").hidden = false;
    $("cancel-agent").disabled = false;
    message("user", "You", goal);
    setBusy("The setup assistant is starting…");
  }

  var ACTIVITY = {
    mcp_setup_search: "Searching the server directories…",
    mcp_setup_get: "Reading the server's details…",
    mcp_setup_request_secret: "Waiting for you to enter a key…",
    mcp_setup_test_connection: "Testing the server…",
    mcp_setup_install_and_connect: "Installing and connecting the server…"
  };

  function setBusy(text) {
    $("busy").textContent = text || "";
    $("busy").hidden = !text;
  }

  // The core's stages of a test or install. "downloading" only happens for MCPB bundles: its
  // row is added when the first downloading event arrives. "installing" and "connected" are
  // the install's own steps after the test.
  var STAGE_WORDS = {
    resolving: "Look up the server",
    downloading: "Download its bundle",
    starting: "Start it on this computer",
    handshake: "Check that it answers",
    tools_listed: "List its tools",
    installing: "Save it on this computer",
    connected: "Connect it"
  };
  var STAGE_BUSY = {
    resolving: "Looking up the server…",
    downloading: "Downloading the server's bundle…",
    starting: "Starting the server…",
    installing: "Saving the server on this computer…",
    connected: "Connecting the server…"
  };
  var TEST_STAGES = ["resolving", "starting", "handshake", "tools_listed"];
  var INSTALL_STAGES = TEST_STAGES.concat(["installing", "connected"]);
  var INSTALL = "mcp_setup_install_and_connect";
  var ICON = { pending: "○", started: "…", done: "✓", failed: "✗" };
  var STATUS_TEXT = { pending: "not yet", started: "in progress", done: "done", failed: "failed" };

  function stepItem(stage) {
    var icon = el("span", { class: "icon", "aria-hidden": "true", text: ICON.pending });
    var state = el("span", { class: "visually-hidden", text: STATUS_TEXT.pending });
    var li = el("li", { class: "step", "data-stage": stage, "data-status": "pending" }, [icon, el("span", null, [STAGE_WORDS[stage], " ", state])]);
    return { li: li, icon: icon, state: state };
  }

  function newSteps(event) {
    var action = event.action || "";
    var title = action === INSTALL ? "Installing" : "Testing";
    var order = (action === INSTALL ? INSTALL_STAGES : TEST_STAGES).slice();
    var list = el("ol");
    var items = {};
    order.forEach(function (stage) {
      items[stage] = stepItem(stage);
      list.appendChild(items[stage].li);
    });
    var block = el("li", { class: "steps", "data-action": action }, [
      el("h4", { text: title + (event.server ? " " + event.server : "") }), list
    ]);
    addToThread(block);
    return { block: block, list: list, items: items, order: order, action: action, tools: [] };
  }

  function addDownloadStep() {
    if (steps.items.downloading) return;
    var item = stepItem("downloading");
    steps.items.downloading = item;
    steps.list.insertBefore(item.li, steps.items.starting.li);
    steps.order.splice(steps.order.indexOf("starting"), 0, "downloading");
  }

  function setStep(stage, status) {
    var item = steps && steps.items[stage];
    if (!item) return;
    item.li.dataset.status = status;
    item.icon.textContent = ICON[status] || "";
    item.state.textContent = STATUS_TEXT[status] || status;
  }

  function foundTools(tools) {
    return tools.length === 1 ? "Found 1 tool" : "Found " + tools.length + " tools";
  }

  function showProblem(event) {
    var text = event.stage === "connected" && !event.code
      ? "It was installed, but it did not connect. The list of installed servers above says why; you can press Reconnect there."
      : plain(event.code, event.message);
    steps.block.appendChild(el("div", { class: "problem", role: "alert" }, [
      el("strong", { text: "It did not work. " }), text,
      event.message ? el("details", null, [el("summary", { text: "Technical details" }), el("p", { text: event.message })]) : null
    ]));
  }

  function onProgress(event) {
    if (event.stage === "agent_step") {
      if (event.step === "tool_call") setBusy(ACTIVITY[event.tool] || "Working…");
      else if (event.step === "tool_result") setBusy("");
      return;
    }
    if (!STAGE_WORDS[event.stage]) return;
    // A new call starts a new block (a failure before its first step, too).
    if (!steps || steps.action !== (event.action || "") || (event.stage === "resolving" && event.status === "started")) {
      steps = newSteps(event);
    }
    if (event.stage === "downloading") addDownloadStep();
    var order = steps.order;
    var index = order.indexOf(event.stage);
    for (var i = 0; i < index; i++) setStep(order[i], "done");
    setStep(event.stage, event.status);
    if (event.status === "started") {
      if (event.stage === "starting") setStep("handshake", "started");
      if (STAGE_BUSY[event.stage]) setBusy(STAGE_BUSY[event.stage]);
    }
    if (event.status === "failed") {
      for (var j = index + 1; j < order.length; j++) setStep(order[j], "pending");
      showProblem(event);
      steps = null;
      return;
    }
    if (event.stage === "tools_listed" && event.status === "done") {
      steps.tools = event.tools || [];
      if (steps.action !== INSTALL) {
        steps.block.appendChild(el("p", { class: "small", text: foundTools(steps.tools) + ":" }));
        steps.block.appendChild(toolList(steps.tools));
        steps = null;
      }
    } else if (event.stage === "connected" && event.status === "done") {
      steps.block.appendChild(el("p", { class: "small", text: "Connected. " + foundTools(steps.tools) + "." }));
      steps = null;
    }
  }

  function onQuestion(event) {
    setBusy("");
    var node = el("li", { class: "msg question", "data-question-id": event.question_id }, [
      el("span", { class: "who", text: "The assistant asks" }), el("p", { text: event.question })
    ]);
    var buttons = [];
    if (event.choices && event.choices.length) {
      var group = el("div", { class: "choices", role: "group", "aria-label": event.question });
      event.choices.forEach(function (choice) {
        var b = el("button", { type: "button", class: "choice", text: choice });
        b.addEventListener("click", function () { answer(event.question_id, choice, b); });
        group.appendChild(b);
        buttons.push(b);
      });
      node.appendChild(group);
    } else {
      var inputId = "answer-" + event.question_id;
      var input = el("input", { type: "text", id: inputId, autocomplete: "off", maxlength: "2000" });
      var submit = el("button", { type: "submit", class: "primary", text: "Send" });
      var form = el("form", null, [
        el("label", { for: inputId, text: "Your answer" }),
        el("div", { class: "row" }, [input, submit]),
        el("p", { class: "small muted", text: "Never type a key or password here: the assistant asks for those in a separate, hidden box." })
      ]);
      form.addEventListener("submit", function (e) {
        e.preventDefault();
        if (!input.value.trim()) { input.focus(); return; }
        var text = input.value;
        answer(event.question_id, text, null);
        message("user", "You", text);
      });
      node.appendChild(form);
      buttons.push(input, submit);
    }
    questionNodes[event.question_id] = { node: node, controls: buttons };
    addToThread(node);
    if (!$("secret-dialog").open && buttons.length) buttons[0].focus();
  }

  function answer(questionId, text, button) {
    var q = questionNodes[questionId];
    if (q) q.controls.forEach(function (c) { c.disabled = true; });
    if (button) button.classList.add("chosen");
    send({ type: "answer", question_id: questionId, answer: text });
  }

  function onQuestionClosed(event) {
    var q = questionNodes[event.question_id];
    if (!q) return;
    q.controls.forEach(function (c) {
      c.disabled = true;
      if (event.answer !== undefined && c.textContent === event.answer) c.classList.add("chosen");
    });
  }

  function onDone(event) {
    var result = event.result || {};
    if (run) run.done = true;
    setBusy("");
    Object.keys(questionNodes).forEach(function (id) { questionNodes[id].controls.forEach(function (c) { c.disabled = true; }); });
    var status = result.status || "failed";
    var title = status === "installed" ? "Installed and connected" : status === "cancelled" ? "Setup cancelled" : "Setup did not finish";
    var card = el("li", { class: "result-card " + status, role: "status" }, [
      el("h4", { text: (status === "installed" ? "✓ " : "") + title }),
      el("p", { text: result.summary || "" })
    ]);
    if (result.tools && result.tools.length) {
      card.appendChild(el("p", { class: "small", text: "Tools now available:" }));
      card.appendChild(toolList(result.tools));
    }
    addToThread(card);
    $("cancel-agent").hidden = true;
    $("new-setup").hidden = false;
    $("new-setup").focus();
    loadServers();
  }

  // ---- the secret modal ---------------------------------------------------------------
  var promptQueue = [];
  var currentPrompt = null;
  var focusBeforePrompt = null;

  function onSecretRequest(event) {
    if ((currentPrompt && currentPrompt.prompt_id === event.prompt_id) ||
        promptQueue.some(function (p) { return p.prompt_id === event.prompt_id; })) return;
    promptQueue.push(event);
    if (run && event.run_id === run.id) {
      note("Waiting for you to enter " + event.key_name + " in the secret box…");
    }
    setBusy("");
    showNextPrompt();
  }

  function showNextPrompt() {
    var dialog = $("secret-dialog");
    if (currentPrompt || !promptQueue.length) return;
    currentPrompt = promptQueue.shift();
    $("secret-key").textContent = currentPrompt.key_name;
    $("secret-server").textContent = currentPrompt.server ? "For the server " + currentPrompt.server : "";
    $("secret-server").hidden = !currentPrompt.server;
    $("secret-prompt").textContent = currentPrompt.prompt || "";
    $("secret-label").textContent = "Your " + currentPrompt.key_name;
    $("secret-value").value = "";
    showError($("secret-error"), "");
    setSecretBusy(false);
    if (!focusBeforePrompt) focusBeforePrompt = document.activeElement;
    if (!dialog.open) dialog.showModal();
    $("secret-value").focus();
  }

  function setSecretBusy(busy) {
    $("secret-submit").disabled = busy;
    $("secret-cancel").disabled = busy;
    $("secret-value").disabled = busy;
  }

  var closingPrompt = false; // the dialog's "close" event comes later: ours, not the browser's

  function closePrompt() {
    var dialog = $("secret-dialog");
    $("secret-value").value = "";
    currentPrompt = null;
    if (promptQueue.length) { showNextPrompt(); return; } // the dialog stays open for the next one
    if (dialog.open) { closingPrompt = true; dialog.close(); }
    var back = focusBeforePrompt;
    focusBeforePrompt = null;
    if (back && document.body.contains(back) && !back.disabled) back.focus();
    else if (!$("thread-area").hidden) $("cancel-agent").hidden ? $("new-setup").focus() : $("cancel-agent").focus();
  }

  function postSecret(promptId, body) {
    return fetch("/api/secrets/" + encodeURIComponent(promptId), {
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

  function submitSecret(event) {
    event.preventDefault();
    if (!currentPrompt) return;
    var input = $("secret-value");
    if (!input.value.trim()) {
      showError($("secret-error"), "Please enter your " + currentPrompt.key_name + ", or press Cancel.");
      input.focus();
      return;
    }
    var body = { value: input.value };
    input.value = ""; // the field never keeps the value
    var prompt = currentPrompt;
    setSecretBusy(true);
    showError($("secret-error"), "");
    postSecret(prompt.prompt_id, body).then(function () {
      body = null;
      if (currentPrompt === prompt) closePrompt();
    }, function (err) {
      body = null;
      if (currentPrompt !== prompt) return;
      setSecretBusy(false);
      if (err.code === "invalid_input") {
        showError($("secret-error"), "Please enter your " + prompt.key_name + ", or press Cancel.");
        input.focus();
      } else if (err.code === "network" || err.code === "internal") {
        showError($("secret-error"), "It was not saved. " + err.message + " Type it again and press Save.");
        input.focus();
      } else {
        closePrompt();
        note(err.message);
      }
    });
  }

  function cancelSecret() {
    if (!currentPrompt) return;
    var prompt = currentPrompt;
    $("secret-value").value = "";
    setSecretBusy(true);
    postSecret(prompt.prompt_id, { cancel: true }).then(function () {
      if (currentPrompt === prompt) closePrompt();
    }, function (err) {
      if (currentPrompt === prompt) closePrompt();
      if (err.code !== "prompt_cancelled" && err.code !== "prompt_not_found") note(err.message);
    });
  }

  function onSecretDone(event) {
    if (run && event.status === "answered") note(event.key_name + " saved. The assistant only gets a reference to it, never the value.");
    if (run && event.status === "cancelled") note("You cancelled entering " + event.key_name + ". The assistant was told.");
    if (run && event.status === "expired") note("The request for " + event.key_name + " expired.");
    promptQueue = promptQueue.filter(function (p) { return p.prompt_id !== event.prompt_id; });
    if (currentPrompt && currentPrompt.prompt_id === event.prompt_id) closePrompt();
  }

  // ---- the websocket ------------------------------------------------------------------
  var socket = null;
  var retry = 0;

  function setConn(state, text) {
    $("conn").dataset.state = state;
    $("conn").textContent = text;
  }

  function socketReady() {
    return socket && socket.readyState === WebSocket.OPEN;
  }

  function send(obj) {
    if (socketReady()) socket.send(JSON.stringify(obj));
    else note(plain("network"));
  }

  function connect() {
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + window.location.host + "/ws");
    socket.addEventListener("open", function () {
      retry = 0;
      setConn("open", "Connected");
    });
    socket.addEventListener("message", function (e) {
      var event;
      try { event = JSON.parse(e.data); } catch (err) { return; }
      handle(event);
    });
    socket.addEventListener("close", function () {
      setConn("closed", "Not connected — retrying…");
      sessionId = null;
      retry = Math.min(retry + 1, 5);
      setTimeout(connect, 500 * retry * retry);
    });
  }

  function handle(event) {
    switch (event.type) {
      case "hello":
        sessionId = event.session_id;
        loadServers();
        break;
      case "agent_started":
        beginThread(event.run_id, event.goal);
        break;
      case "agent_message":
        if (!run || run.id !== event.run_id) break;
        message("agent", "Assistant", event.text);
        break;
      case "agent_question":
        if (!run || run.id !== event.run_id) break;
        onQuestion(event);
        break;
      case "question_closed":
        onQuestionClosed(event);
        break;
      case "agent_done":
        if (!run || run.id !== event.run_id) break;
        onDone(event);
        break;
      case "progress":
        if (!run || run.id !== event.run_id) break; // calls outside this page's run are not shown here
        onProgress(event);
        break;
      case "secret_request":
        onSecretRequest(event);
        break;
      case "secret_done":
        onSecretDone(event);
        break;
      case "server_status":
        loadServersSoon();
        break;
      case "error":
        if (event.code === "invalid_input" || event.code === "agent_busy") showError($("goal-error"), plain(event.code, event.message));
        else if (run && !run.done) note(event.message);
        break;
      default:
        break;
    }
  }

  // ---- wiring -------------------------------------------------------------------------
  var SOURCES = { local: "your local catalog", official: "the official MCP registry", smithery: "Smithery" };

  function searchRegistries(event) {
    event.preventDefault();
    var query = $("search").value.trim();
    var results = $("search-results");
    $("search-button").disabled = true;
    $("search-status").textContent = "Searching…";
    rpc("mcp_setup_search", { query: query, page_size: 20 }).then(function (result) {
      results.textContent = "";
      var servers = result.servers || [];
      var words = servers.length === 0 ? "Nothing found. Try other words." : servers.length === 1 ? "1 server found." : servers.length + " servers found.";
      if (result.errors && result.errors.length) {
        words += " Some directories could not be searched: " + result.errors.map(function (e) { return e.source; }).join(", ") + ".";
      }
      $("search-status").textContent = words;
      servers.forEach(function (server) {
        var name = server.qualified_name;
        var button = el("button", { type: "button", class: "primary", text: "Set up", "aria-label": "Set up " + name });
        button.addEventListener("click", function () { startRun("set up " + name); });
        results.appendChild(el("li", { class: "result" }, [
          el("div", { class: "result-text" }, [
            el("div", { class: "result-name", text: server.display_name || name }),
            server.display_name && server.display_name !== name ? el("div", { class: "small muted", text: name }) : null,
            server.description ? el("div", { class: "small", text: server.description }) : null,
            server.source ? el("div", { class: "small muted", text: "From " + (SOURCES[server.source] || server.source) }) : null
          ]),
          button
        ]));
      });
    }, function (err) {
      $("search-status").textContent = "The search did not work. " + err.message;
    }).then(function () { $("search-button").disabled = false; });
  }

  document.addEventListener("DOMContentLoaded", function () {
    $("add-server").addEventListener("click", function () {
      if ($("setup").hidden) openSetup(); else $("goal").focus();
    });
    $("close-setup").addEventListener("click", closeSetup);
    $("goal-form").addEventListener("submit", function (e) { e.preventDefault(); startRun($("goal").value); });
    $("search-form").addEventListener("submit", searchRegistries);
    $("cancel-agent").addEventListener("click", function () {
      $("cancel-agent").disabled = true;
      setBusy("Cancelling…");
      send({ type: "cancel_agent", run_id: run && run.id });
    });
    $("new-setup").addEventListener("click", resetSetup);
    $("secret-form").addEventListener("submit", submitSecret);
    $("secret-cancel").addEventListener("click", cancelSecret);
    $("secret-dialog").addEventListener("cancel", function (e) { e.preventDefault(); cancelSecret(); });
    // Closed by the browser itself (e.g. Esc pressed twice): still a cancel, so the assistant is told.
    $("secret-dialog").addEventListener("close", function () {
      if (closingPrompt) { closingPrompt = false; return; }
      if (currentPrompt) cancelSecret();
    });
    connect();
  });
})();
