#!/usr/bin/env python3
"""Stdlib-only stdio MCP stub server (newline-delimited JSON-RPC 2.0), for tests.

Runs with any python3 >= 3.6, imports nothing outside the standard library, logs only
to stderr and exits on stdin EOF. Behaviour is chosen by environment variables (or flags):

  STUB_REQUIRED_ENV    name of the required variable (default STUB_API_KEY)
  STUB_EXPECTED_SHA256 sha256 hex the variable's value must hash to (optional)
  STUB_REQUIRE=0       disable the requirement
  STUB_PROTOCOL / --protocol V   force the protocol version answered at initialize
  STUB_MODE / --mode M[,M...]    modes, comma-separated (below)
  STUB_SLOW_SECONDS (2)  STUB_TOOL_COUNT (500)  STUB_EXIT_DELAY (30)
  STUB_PID_FILE        append own pid (and a grandchild's) one per line
  STUB_TOOLS_FILE      a JSON file read at each start (absent: no change) changing the tool
                       list: {"extra": [tool, ...], "descriptions": {name: text},
                       "remove": [name, ...]} (tool pinning tests: change it between runs);
                       an extra tool's "_stubResult" is what a call of it answers, as is;
                       its "_stubRequest" {method, params} is a request the stub sends the
                       client during the call (the answer is the call's text), its
                       "_stubNotify" notifications the stub sends after its answer (a prompt's: before its answer). The file
                       may also hold "prompts", "resources" and "templates" (then declared),
                       "{KEY}" in their texts is the required variable's value (canaries)

Modes: hang (reads, never answers), hang_after_init (never answers tools/*),
crash (stderr "stub: fatal: simulated crash", exit 3 before reading), garbage
(non-JSON lines instead of the initialize answer), grandchild (spawns a sleeping
python in the same process group, logs "stub: grandchild pid N"), slow (sleeps
before its first answer), many_tools (pages of 50), echo_env (env to stderr; the
value in tool `leak`'s description and in echo(text="env")), ignore_sigterm
(SIG_IGN; on EOF waits STUB_EXIT_DELAY), ignore_unknown (no answer at all to
server/discover or unknown methods, like some legacy servers), flood (echo sends
STUB_FLOOD_COUNT (5000) progress notifications before its answer), key_hash (a tool
answering the sha256 of the key it was started with, and a random id of this
process: a pid means little in a sandbox's own pid namespace; with STUB_SECOND_ENV naming
another variable, its sha256 too), modern (answers
server/discover for 2026-07-28, then answers as always: without resultType),
key_on_call (starts and lists its tools with any key, checking it only when a tool is
called: a wrong or missing key answers the call with an isError "401 Unauthorized"
result, as real Notion and Brave servers do), readonly_tool (adds `account`, read-only
and argument-free, `search`, read-only with a required argument, and `purge`, not
read-only, all argument-free but search).

  STUB_CALLS_FILE      append the name of every tool called, one per line
  STUB_REQUESTS_FILE   append the method of every request it answers, one per line
  STUB_OPEN            a file the stub reads at start, as a server reads its folder's files:
                       when it cannot, it logs Python's own error and exits 2
"""

import hashlib
import json
import os
import signal
import sys
import time

SUPPORTED = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST = "2025-11-25"
PAGE_SIZE = 50
MODES = (
    "hang",
    "hang_after_init",
    "crash",
    "garbage",
    "grandchild",
    "slow",
    "many_tools",
    "echo_env",
    "ignore_sigterm",
    "ignore_unknown",
    "exit_on_eof_leave_grandchild",
    "flood",
    "modern",
    "key_on_call",
    "readonly_tool",
)
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
AUTH_ERROR = -32001


RUN_ID = os.urandom(8).hex()  # this process's own id (key_hash)


def log(msg: str) -> None:
    """One line to stderr."""
    try:
        sys.stderr.write("stub: %s\n" % msg)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def parse_args(argv):
    """Tiny flag parser: --mode X, --protocol X (also --flag=X)."""
    out = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--") and "=" in arg:
            key, val = arg[2:].split("=", 1)
            out[key] = val
        elif arg in ("--mode", "--protocol") and i + 1 < len(argv):
            out[arg[2:]] = argv[i + 1]
            i += 1
        else:
            log("ignoring argument %r" % arg)
        i += 1
    return out


def record_pid(pid: int) -> None:
    """Append a pid to STUB_PID_FILE when set."""
    path = os.environ.get("STUB_PID_FILE")
    if path:
        with open(path, "a") as f:
            f.write("%d\n" % pid)


class Stub:
    """The server state and its method handlers."""

    def __init__(self, modes, protocol):
        self.modes = modes
        self.protocol = protocol
        self.key_name = os.environ.get("STUB_REQUIRED_ENV") or "STUB_API_KEY"
        self.initialized = False
        self.slow_pending = "slow" in modes
        self.tools = self._build_tools()
        self.offers = read_tools_file(os.environ.get("STUB_TOOLS_FILE"))
        self.reader = None  # reads the next message from the client (set by main)
        self.after = []  # notifications to send once the current answer is out

    # -- configuration -------------------------------------------------
    def auth_error(self):
        """Message for a missing/wrong required variable, or None when fine."""
        if os.environ.get("STUB_REQUIRE", "1") == "0":
            return None
        value = os.environ.get(self.key_name)
        if not value:
            return "missing %s" % self.key_name
        expected = (os.environ.get("STUB_EXPECTED_SHA256") or "").strip().lower()
        if expected and hashlib.sha256(value.encode("utf-8")).hexdigest() != expected:
            return "invalid API key for %s" % self.key_name
        return None

    def _build_tools(self):
        tools = [
            {
                "name": "echo",
                "description": "Echo the given text back.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"text": {"type": "string", "description": "Text to echo"}},
                    "required": ["text"],
                },
            },
            {
                "name": "whoami",
                "description": "Answer 'ok' when the server is configured.",
                "inputSchema": {"type": "object", "properties": {}},
            },
        ]
        if "echo_env" in self.modes:
            tools.append(
                {
                    "name": "leak",
                    "description": "Leaks the key: %s" % os.environ.get(self.key_name, ""),
                    "inputSchema": {"type": "object", "properties": {}},
                }
            )
        if "readonly_tool" in self.modes:  # a key checked by a read-only call (credential check tests)
            tools.extend(READONLY_TOOLS)
        if "key_hash" in self.modes:  # which key it was started with, as a hash (per-member tests)
            tools.append(
                {
                    "name": "key_hash",
                    "description": "The sha256 of the key this process was started with, and this process's random id.",
                    "inputSchema": {"type": "object", "properties": {}},
                }
            )
        tools = apply_tools_file(tools, os.environ.get("STUB_TOOLS_FILE"))
        if "many_tools" in self.modes:
            count = int(os.environ.get("STUB_TOOL_COUNT") or 500)
            for n in range(len(tools), count):
                tools.append(
                    {
                        "name": "tool_%04d" % n,
                        "description": "Filler tool number %d." % n,
                        "inputSchema": {
                            "type": "object",
                            "properties": {"n": {"type": "integer"}},
                        },
                    }
                )
        return tools

    # -- handlers ------------------------------------------------------
    def handle(self, method, params):
        """Return (result, None) or (None, (code, message)); (None, None) = no answer."""
        if "hang" in self.modes:
            return None, None
        record_request(method)
        if self.slow_pending:  # a slow start: delays the first answer (discover or initialize)
            self.slow_pending = False
            delay = float(os.environ.get("STUB_SLOW_SECONDS") or 2)
            log("slow: sleeping %.2fs before answering %s" % (delay, method))
            time.sleep(delay)
        if "hang_after_init" in self.modes and method.startswith("tools/"):
            return None, None
        if method == "initialize":
            return self.initialize(params)
        if method == "server/discover":
            if "ignore_unknown" in self.modes:
                return None, None
            err = None if "key_on_call" in self.modes else self.auth_error()
            if err:
                return None, (AUTH_ERROR, err)
            if "modern" in self.modes:  # 2026-07-28, whose later answers lack resultType (a sloppy server)
                return {
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "mcp-setup-stub", "version": "1.0.0"},
                    "ttlMs": 0,
                    "cacheScope": "private",
                    "resultType": "complete",
                }, None
            return None, (METHOD_NOT_FOUND, "Method not found: server/discover")
        if method == "ping":
            return {}, None
        if method == "tools/list":
            return self.list_tools(params)
        if method == "tools/call":
            return self.call_tool(params)
        if method in OFFER_METHODS and (
            self.offers.get(OFFER_METHODS[method][0]) is not None
            or (method == "resources/read" and self.offers.get("templates") is not None)
        ):
            return self.offer(method, params)
        if "ignore_unknown" in self.modes:
            return None, None
        return None, (METHOD_NOT_FOUND, "Method not found: %s" % method)

    def initialize(self, params):
        if "garbage" in self.modes:
            write_raw("this is not json\n{broken json\n<html>garbage</html>\n")
            return None, None
        err = None if "key_on_call" in self.modes else self.auth_error()
        if err:
            log("rejecting initialize: %s" % err)
            return None, (AUTH_ERROR, err)
        requested = params.get("protocolVersion")
        version = self.protocol or (requested if requested in SUPPORTED else LATEST)
        self.initialized = True
        capabilities = {"tools": {"listChanged": False}}
        if self.offers.get("prompts") is not None:
            capabilities.update(prompts={}, completions={})
        if self.offers.get("resources") is not None or self.offers.get("templates") is not None:
            capabilities["resources"] = {"subscribe": True}  # it answers with one update at once
        return {
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": {"name": "mcp-setup-stub", "version": "1.0.0"},
            "instructions": "Stub MCP server for mcp-setup tests.",
        }, None

    def list_tools(self, params):
        cursor = params.get("cursor")
        start = 0
        if cursor is not None:
            try:
                start = int(cursor)
            except (TypeError, ValueError):
                return None, (INVALID_PARAMS, "invalid cursor")
            if start < 0 or start >= len(self.tools):
                return None, (INVALID_PARAMS, "invalid cursor")
        if len(self.tools) <= PAGE_SIZE and cursor is None:
            return {"tools": self.tools}, None
        end = start + PAGE_SIZE
        result = {"tools": self.tools[start:end]}
        if end < len(self.tools):
            result["nextCursor"] = str(end)
        return result, None

    def call_tool(self, params):
        name = params.get("name")
        args = params.get("arguments") or {}
        record_call(name)
        if "key_on_call" in self.modes:
            err = self.auth_error()
            if err:  # the key is checked only now, and said in a result, not a protocol error
                log("refusing tool %s: %s" % (name, err))
                return dict(text_result("Error: 401 Unauthorized (%s)" % err), isError=True), None
        if name in READONLY_NAMES and "readonly_tool" in self.modes:
            return text_result("%s ok" % name), None
        if name == "echo":
            text = str(args.get("text", ""))
            token = (params.get("_meta") or {}).get("progressToken")
            if "flood" in self.modes and token is not None:
                for n in range(int(os.environ.get("STUB_FLOOD_COUNT") or 5000)):
                    send(
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": n},
                        }
                    )
            if "echo_env" in self.modes and text == "env":
                text = os.environ.get(self.key_name, "")
            return text_result(text), None
        if name == "whoami":
            return text_result("ok"), None
        if name == "key_hash" and "key_hash" in self.modes:
            value = os.environ.get(self.key_name, "")
            text = "sha256=%s run=%s" % (hashlib.sha256(value.encode("utf-8")).hexdigest(), RUN_ID)
            second = os.environ.get("STUB_SECOND_ENV")
            if second:  # a second key's hash too (a shared key beside a member's own)
                text += " second=%s" % hashlib.sha256(os.environ.get(second, "").encode("utf-8")).hexdigest()
            return text_result(text), None
        for tool in self.tools:
            if tool["name"] == name:  # a tools-file tool may say its answer ("_stubResult", as sent)
                if tool.get("_stubNotify"):
                    self.after = [keyed(n, self.key_name) for n in tool["_stubNotify"]]
                if tool.get("_stubRequest"):
                    asked = keyed(tool["_stubRequest"], self.key_name)
                    return text_result(json.dumps(self.ask_client(asked["method"], asked.get("params") or {}))), None
                return tool.get("_stubResult") or text_result("%s ok" % name), None
        return None, (INVALID_PARAMS, "unknown tool: %s" % name)

    def ask_client(self, method, params):
        """Send the client a request and wait for its answer (handling what arrives meanwhile)."""
        send({"jsonrpc": "2.0", "id": "stub-ask", "method": method, "params": params})
        while True:
            msg = self.reader()
            if msg is None:
                return {"error": "stdin closed"}
            if isinstance(msg, dict) and msg.get("id") == "stub-ask" and "method" not in msg:
                return msg.get("result") if "result" in msg else {"error": msg.get("error")}
            reply = process(self, msg)
            if reply is not None:
                send(reply)

    def offer(self, method, params):
        """prompts/*, resources/*, completion/complete from the tools file ("{KEY}" filled in)."""
        key = self.key_name
        if method == "prompts/list":
            return {"prompts": [public(p) for p in self.offers["prompts"]]}, None
        if method == "resources/list":
            return {"resources": [public(r) for r in self.offers.get("resources") or ()]}, None
        if method == "resources/templates/list":
            return {"resourceTemplates": [public(t) for t in self.offers.get("templates") or ()]}, None
        if method == "prompts/get":
            for prompt in self.offers["prompts"]:
                if prompt["name"] == params.get("name"):
                    for notification in prompt.get("_stubNotify") or ():  # e.g. a log message, no call in flight
                        send(dict(keyed(notification, key), jsonrpc="2.0"))
                    text = keyed(prompt.get("_stubText") or "prompt %s" % prompt["name"], key)
                    text += " " + json.dumps(params.get("arguments") or {}, sort_keys=True)
                    return {
                        "description": prompt.get("description", ""),
                        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
                    }, None
            return None, (INVALID_PARAMS, "unknown prompt: %s" % params.get("name"))
        if method == "completion/complete":
            typed = str((params.get("argument") or {}).get("value", ""))
            return {
                "completion": {"values": [typed + "-one", typed + "-two", keyed("{KEY}", key)], "hasMore": False}
            }, None
        uri = str(params.get("uri", ""))
        if method == "resources/subscribe":  # changed at once: one update after the answer
            self.after = [{"method": "notifications/resources/updated", "params": {"uri": uri}}]
            return {}, None
        if method == "resources/unsubscribe":
            return {}, None
        for resource in self.offers.get("resources") or ():
            if resource["uri"] == uri:
                text = keyed(resource.get("_stubText") or "resource %s" % uri, key)
                return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]}, None
        for template in self.offers.get("templates") or ():
            if uri.startswith(template["uriTemplate"].split("{", 1)[0]):
                return {
                    "contents": [
                        {
                            "uri": uri,
                            "mimeType": "text/plain",
                            "text": "%s read %s" % (self.offers.get("name", "stub"), uri),
                        }
                    ]
                }, None
        return None, (INVALID_PARAMS, "unknown resource: %s" % uri)


READONLY_TOOLS = [
    {
        "name": "account",
        "description": "The account the key belongs to.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "search",
        "description": "Search the account's pages.",
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "purge",
        "description": "Delete every page of the account.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": False, "destructiveHint": True},
    },
]
READONLY_NAMES = {t["name"] for t in READONLY_TOOLS}


def record_call(name) -> None:
    """Append a called tool's name to STUB_CALLS_FILE when set."""
    path = os.environ.get("STUB_CALLS_FILE")
    if path:
        with open(path, "a") as f:
            f.write("%s\n" % name)


def record_request(method) -> None:
    """Append a request's method to STUB_REQUESTS_FILE when set."""
    path = os.environ.get("STUB_REQUESTS_FILE")
    if path:
        with open(path, "a") as f:
            f.write("%s\n" % method)


OFFER_METHODS = {
    "prompts/list": ("prompts",),
    "prompts/get": ("prompts",),
    "completion/complete": ("prompts",),
    "resources/list": ("resources",),
    "resources/read": ("resources",),
    "resources/templates/list": ("templates",),
    "resources/subscribe": ("resources",),
    "resources/unsubscribe": ("resources",),
}


def public(item):
    """An item of the tools file without the stub's own fields."""
    return {k: v for k, v in item.items() if not k.startswith("_stub")}


def keyed(value, key_name):
    """``value`` with every "{KEY}" replaced by the required variable's value."""
    return json.loads(json.dumps(value).replace("{KEY}", os.environ.get(key_name, "")))


def read_tools_file(path):
    if not path or not os.path.isfile(path):
        return {}
    with open(path) as f:
        return json.load(f)


def apply_tools_file(tools, path):
    """The tool list changed as the STUB_TOOLS_FILE says (unchanged when unset or absent)."""
    if not path or not os.path.isfile(path):
        return tools
    with open(path) as f:
        change = json.load(f)
    removed = set(change.get("remove") or ())
    out = []
    for tool in tools:
        if tool["name"] in removed:
            continue
        text = (change.get("descriptions") or {}).get(tool["name"])
        out.append(dict(tool, description=text) if text is not None else tool)
    return out + list(change.get("extra") or ())


def text_result(text: str) -> dict:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def write_raw(text: str) -> None:
    """Write to stdout and flush; exit quietly if the reader is gone."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        os._exit(0)


def send(msg) -> None:
    write_raw(json.dumps(msg, separators=(",", ":")) + "\n")


def process(stub, msg):
    """Handle one decoded message; return the response or None."""
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        return error_response(None, -32600, "Invalid Request")
    method = msg.get("method")
    is_request = "id" in msg
    if method is None:
        return None  # a response to something we never sent: ignore
    params = msg.get("params") or {}
    if not isinstance(params, dict):
        params = {}
    if not is_request:
        return None  # notifications (incl. notifications/initialized) are ignored
    result, err = stub.handle(method, params)
    if err is not None:
        return error_response(msg["id"], err[0], err[1])
    if result is None:
        return None
    return {"jsonrpc": "2.0", "id": msg["id"], "result": result}


def error_response(msg_id, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def spawn_grandchild() -> None:
    """Start a long-lived grandchild in our process group, with no inherited pipes."""
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
    )
    log("grandchild pid %d" % proc.pid)
    record_pid(proc.pid)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    raw_modes = args.get("mode", os.environ.get("STUB_MODE", ""))
    modes = {m.strip() for m in raw_modes.split(",") if m.strip()}
    for m in sorted(modes - set(MODES)):
        log("unknown mode %r ignored" % m)
    if "exit_on_eof_leave_grandchild" in modes:
        modes.add("grandchild")
    protocol = args.get("protocol") or os.environ.get("STUB_PROTOCOL") or None
    record_pid(os.getpid())
    log("started pid %d modes=%s" % (os.getpid(), ",".join(sorted(modes)) or "-"))
    if os.environ.get("STUB_OPEN"):
        try:
            with open(os.environ["STUB_OPEN"]) as f:
                f.read(1)
        except OSError as exc:
            log("fatal: %s: %s" % (type(exc).__name__, exc))
            return 2
    if "crash" in modes:
        log("fatal: simulated crash")
        sys.stderr.flush()
        return 3
    if "ignore_sigterm" in modes:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "echo_env" in modes:
        for name in sorted(os.environ):
            log("env %s=%s" % (name, os.environ[name]))
    if "grandchild" in modes:
        spawn_grandchild()
    stub = Stub(modes, protocol)
    stdin = sys.stdin.buffer

    def read_message():
        """The next decoded message (None at EOF); a line that is not JSON is answered."""
        while True:
            line = stdin.readline()
            if not line:
                return None
            line = line.strip()
            if not line:
                continue
            try:
                return json.loads(line.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                send(error_response(None, -32700, "Parse error"))

    stub.reader = read_message
    while True:
        msg = read_message()
        if msg is None:
            break
        if isinstance(msg, list):
            replies = [r for r in (process(stub, m) for m in msg) if r is not None]
            if replies:
                send(replies)
        else:
            reply = process(stub, msg)
            if reply is not None:
                send(reply)
            for notification in getattr(stub, "after", ()):  # "_stubNotify": after the answer
                send(dict(notification, jsonrpc="2.0"))
            stub.after = []
    log("stdin closed")
    if "ignore_sigterm" in modes:
        delay = float(os.environ.get("STUB_EXIT_DELAY") or 30)
        log("ignore_sigterm: exiting in %.1fs" % delay)
        time.sleep(delay)
    return 0


if __name__ == "__main__":
    sys.exit(main())
