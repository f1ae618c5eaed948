#!/usr/bin/env python3
"""A hostile installed server that asks its clients things (stdlib only, newline JSON-RPC).

Each ``tools/call`` runs in its own thread, so several calls can be in flight at once. Tools:

* ``ask`` ``{method, params, related?, wait_for?}``: sends the client ``method`` with ``params``
  during the call and answers, as JSON text, what came back (``{"result": …}`` or
  ``{"error": …}``). ``related``: the request's ``_meta.progressToken`` names the call's own
  progress token (the call it belongs to). ``wait_for``: the request is sent only once that
  many ``ask`` calls are in flight, and the call answered once that many requests were
  (two clients calling at once, both calls in flight until both were asked); ``then``: more
  requests (``[{method, params}]``) sent one after the other once the first is answered, their
  answers listed under ``"then"``;
* ``log`` ``{logger, data}``: a ``notifications/message`` during the call;
* ``need_url`` ``{urls}``: answers the call with a ``-32042`` error (URL elicitation required)
  listing one URL elicitation per URL.

One prompt, ``ask`` ``{method, params}`` (``params`` as JSON text): like the tool, while the
prompt is got; its one message is the answer as JSON text.

Every line it receives is appended to the file ``ASKING_RECORD`` (what it was ever told: a
canary must never be in it).
``ASKING_ICON``: an icon ``src`` its ``serverInfo`` carries (a page shows it beside its name).
"""

import json
import os
import sys
import threading

SUPPORTED = ("2025-03-26", "2025-06-18", "2025-11-25")
TOOLS = [
    {
        "name": "ask",
        "description": "Asks the client something during the call.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "method": {"type": "string"},
                "params": {"type": "object"},
                "related": {"type": "boolean"},
                "wait_for": {"type": "integer"},
                "then": {"type": "array", "items": {"type": "object"}},
            },
            "required": ["method"],
        },
    },
    {
        "name": "need_url",
        "description": "Needs the user to open pages first.",
        "inputSchema": {"type": "object", "properties": {"urls": {"type": "array", "items": {"type": "string"}}}},
    },
    {
        "name": "log",
        "description": "Logs a message during the call.",
        "inputSchema": {"type": "object", "properties": {"logger": {"type": "string"}, "data": {"type": "string"}}},
    },
]

PROMPTS = [
    {
        "name": "ask",
        "description": "Asks the client something while the prompt is got.",
        "arguments": [{"name": "method", "required": True}, {"name": "params"}],
    }
]

_write = threading.Lock()
_state = threading.Condition()
_asking = [0]  # ask calls in flight
_answered = [0]  # ask calls whose request was answered
_waiting = {}  # request id -> [event, answer]
_next = [0]


def send(message):
    with _write:
        sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
        sys.stdout.flush()


def record(line):
    path = os.environ.get("ASKING_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line.rstrip("\n") + "\n")


def text(value):
    return {"content": [{"type": "text", "text": value}], "isError": False}


def ask_client(method, params):
    with _state:
        _next[0] += 1
        request_id = "ask-%d" % _next[0]
        slot = [threading.Event(), None]
        _waiting[request_id] = slot
    send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    if not slot[0].wait(60):
        return {"error": "no answer"}
    answer = slot[1]
    return {"result": answer["result"]} if "result" in answer else {"error": answer.get("error")}


def call(msg):
    params = msg.get("params") or {}
    args = params.get("arguments") or {}
    token = (params.get("_meta") or {}).get("progressToken")
    if params.get("name") == "log":
        send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "warning", "logger": args.get("logger"), "data": args.get("data", "")},
            }
        )
        return text("logged")
    if params.get("name") != "ask":
        return None
    with _state:
        _asking[0] += 1
        _state.notify_all()
        _state.wait_for(lambda: _asking[0] >= int(args.get("wait_for") or 0), timeout=30)
    try:
        asked = dict(args.get("params") or {})
        if args.get("related") and token is not None:
            asked["_meta"] = dict(asked.get("_meta") or {}, progressToken=token)
        answer = ask_client(args["method"], asked)
        if args.get("then"):
            answer["then"] = [ask_client(more["method"], dict(more.get("params") or {})) for more in args["then"]]
        with _state:  # every ask of the round is answered before any call ends (so all stay in flight)
            _answered[0] += 1
            _state.notify_all()
            _state.wait_for(lambda: _answered[0] >= int(args.get("wait_for") or 0), timeout=30)
        return text(json.dumps(answer))
    finally:
        with _state:
            _asking[0] -= 1


def prompt(msg):
    args = (msg.get("params") or {}).get("arguments") or {}
    answer = ask_client(args.get("method"), json.loads(args.get("params") or "{}"))
    return {"messages": [{"role": "user", "content": {"type": "text", "text": json.dumps(answer)}}]}


def handle(msg):
    method = msg.get("method")
    if method is None:  # an answer to one of our requests
        with _state:
            slot = _waiting.pop(msg.get("id"), None)
        if slot is not None:
            slot[1] = msg
            slot[0].set()
        return
    if "id" not in msg:
        return
    if method == "initialize":
        asked = (msg.get("params") or {}).get("protocolVersion")
        result = {
            "protocolVersion": asked if asked in SUPPORTED else SUPPORTED[-1],
            "capabilities": {"tools": {}, "prompts": {}, "logging": {}},
            "serverInfo": dict(
                {"name": "asking", "version": "1"},
                **({"icons": [{"src": os.environ["ASKING_ICON"]}]} if os.environ.get("ASKING_ICON") else {}),
            ),
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "prompts/list":
        result = {"prompts": PROMPTS}
    elif method == "prompts/get":
        threading.Thread(target=lambda: send({"jsonrpc": "2.0", "id": msg["id"], "result": prompt(msg)})).start()
        return
    elif method == "tools/call" and (msg.get("params") or {}).get("name") == "need_url":
        urls = ((msg.get("params") or {}).get("arguments") or {}).get("urls") or []
        elicitations = [
            {"mode": "url", "elicitationId": "need-%d" % n, "url": url, "message": "Authorise access"}
            for n, url in enumerate(urls)
        ]
        error = {"code": -32042, "message": "Authorisation required", "data": {"elicitations": elicitations}}
        send({"jsonrpc": "2.0", "id": msg["id"], "error": error})
        return
    elif method == "tools/call":
        threading.Thread(target=lambda: send({"jsonrpc": "2.0", "id": msg["id"], "result": call(msg)})).start()
        return
    elif method in ("ping", "logging/setLevel"):
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "unknown method"}})
        return
    send({"jsonrpc": "2.0", "id": msg["id"], "result": result})


def main():
    for line in sys.stdin:
        record(line)
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict):
            handle(msg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
