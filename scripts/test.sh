#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: installs what the tests need, then pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh -k probe).
#   --under-load   keep every core busy meanwhile (stress-ng if installed, else a busy loop;
#                  stopped at exit) and raise the hang guards' scale factor to 3 unless set.
# Environment: MCP_SETUP_TEST_NO_INSTALL=1 (skip the pip install), MCP_SETUP_TEST_NO_STYLE=1 (skip ruff and mypy),
# MCP_SETUP_TEST_PREFORK=0 (start the tests' mcp-setup processes without the fork server,
# tests/helpers/prefork.py), MCP_SETUP_TEST_TIMEOUT_SCALE (factor for every hang guard and the per-test
# timeout, default 1), MCP_SETUP_TEST_WORKERS (pytest-xdist workers, default: one per core;
# 0 runs in this process), MCP_SETUP_TEST_SUITE_TIMEOUT (seconds for the whole pytest run,
# default 2400 times the scale factor: past it every test process dumps its threads' stacks
# and the run fails).
set -euo pipefail
cd "$(dirname "$0")/.."

under_load=0
pytest_args=()
for arg in "$@"; do
  if [ "$arg" = "--under-load" ]; then under_load=1; else pytest_args+=("$arg"); fi
done

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs npm)
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)  # the servers' sandbox (docs/sandbox.md)
[ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1 || need_apt+=(nginx)  # the two-replica team test (#28)
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
[ -n "$(pg_bin)" ] || need_apt+=(postgresql)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing ${need_apt[*]} (Debian packages) for the browser, npm, sandbox and PostgreSQL tests" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "missing ${need_apt[*]}: install them (sudo apt-get install ${need_apt[*]}) and run again" >&2
    exit 1
  fi
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# MCP_SETUP_TEST_NO_INSTALL=1 skips the install (a second checkout sharing this .venv, with its
# own tree first on PYTHONPATH).
[ "${MCP_SETUP_TEST_NO_INSTALL:-0}" = 1 ] || \
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test,postgres]"

# A throwaway PostgreSQL cluster: temp data dir, a free local port, its unix socket in the temp
# dir; stopped (and deleted) at exit, also when the tests fail. The store, migration and
# connection tests run on it as well as on SQLite (MCP_SETUP_TEST_POSTGRES_URL).
pg_dir=""
stop_postgres() {
  if [ -n "$pg_dir" ] && [ -d "$pg_dir" ]; then
    as_pg "$(pg_bin)/pg_ctl" -D "$pg_dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$pg_dir"
  fi
}
as_pg() {  # initdb refuses to run as root: run the cluster as the postgres system user
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
# A worker's stuck test: its threads' stacks are written here (tests/conftest.py).
stacks_dir="$(mktemp -d /tmp/mcp-setup-stacks.XXXXXX)"
export MCP_SETUP_TEST_STACKS_DIR="$stacks_dir"
load_pids=()
stop_load() {
  if [ ${#load_pids[@]} -gt 0 ]; then
    kill "${load_pids[@]}" 2>/dev/null || true
    wait "${load_pids[@]}" 2>/dev/null || true
    load_pids=()
  fi
}
trap 'stop_load; stop_postgres; rm -rf "$stacks_dir"' EXIT
trap "exit 130" INT
trap "exit 143" TERM
pg_dir="$(mktemp -d /tmp/mcp-setup-pg.XXXXXX)"
chmod 755 "$pg_dir"
[ "$(id -u)" = 0 ] && chown postgres: "$pg_dir"
pg_port="$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
as_pg "$(pg_bin)/initdb" -D "$pg_dir/data" -U mcp_setup -A trust -E UTF8 --no-sync >"$pg_dir/initdb.log" 2>&1 \
  || { cat "$pg_dir/initdb.log" >&2; exit 1; }
as_pg "$(pg_bin)/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 \
  -o "-p $pg_port -k $pg_dir -c listen_addresses= -c fsync=off -c max_connections=200" start >/dev/null \
  || { cat "$pg_dir/server.log" >&2; exit 1; }
export MCP_SETUP_TEST_POSTGRES_URL="postgresql+psycopg://mcp_setup@/postgres?host=$pg_dir&port=$pg_port"

# A worker per core (pytest-xdist; every test has its own data dir, ports, keyring and
# database). A test file goes whole to one worker (its module fixtures are made once), the
# longest files first (tests/helpers/slow_first.py orders them from tests/durations.json), so
# the run ends on short files on both workers. Not when the caller chose (-n, --dist, -p no:xdist).
xdist=(-n "${MCP_SETUP_TEST_WORKERS:-auto}" --dist loadscope --no-loadscope-reorder)
for arg in ${pytest_args[@]+"${pytest_args[@]}"}; do
  case "$arg" in -n|-n*|--numprocesses*|--dist*|no:xdist) xdist=() ;; esac
done
[ "${MCP_SETUP_TEST_WORKERS:-auto}" = 0 ] && xdist=()

if [ "$under_load" = 1 ]; then
  export MCP_SETUP_TEST_TIMEOUT_SCALE="${MCP_SETUP_TEST_TIMEOUT_SCALE:-3}"
  cores="$(nproc)"
  if command -v stress-ng >/dev/null 2>&1; then
    stress-ng --cpu "$cores" --quiet &
    load_pids+=($!)
  else
    for _ in $(seq "$cores"); do
      bash -c 'while :; do :; done' &
      load_pids+=($!)
    done
  fi
  echo "under load: $cores busy CPU workers (pids ${load_pids[*]}), MCP_SETUP_TEST_TIMEOUT_SCALE=$MCP_SETUP_TEST_TIMEOUT_SCALE" >&2
fi

# The whole run is bounded too: past the bound every process of the run gets SIGABRT, whose
# handler (faulthandler, on in pytest and its workers) prints every thread's stack; 60 s
# later what is left is killed. pytest-timeout bounds each test (pyproject.toml). The default
# bound, 2400 s, grows with the scale factor like every other hang guard.
suite_timeout="${MCP_SETUP_TEST_SUITE_TIMEOUT:-$(awk -v s="${MCP_SETUP_TEST_TIMEOUT_SCALE:-1}" 'BEGIN { t = 2400 * s; if (!(t >= 2400)) t = 2400; printf "%d", t }')}"
# The style checks: the configured lint rules, the formatter and the type checker (pyproject.toml).
# They run beside the tests (mypy keeps its incremental cache in .mypy_cache; cold it takes about
# 15 s of one core, which the tests' start leaves free) and say what they found after them; a
# failure fails the run, and the suite still runs, so one run shows everything.
style_status=0
style_pid=""
style_log="$stacks_dir/style.log"
if [ "${MCP_SETUP_TEST_NO_STYLE:-0}" != 1 ]; then
  (
    found=0
    .venv/bin/ruff check --quiet . || found=1
    .venv/bin/ruff format --check --quiet . || { echo "ruff format would change the files above: run .venv/bin/ruff format ."; found=1; }
    .venv/bin/mypy || { echo "mypy found the type errors above (the files and rules are in pyproject.toml)"; found=1; }
    exit "$found"
  ) >"$style_log" 2>&1 &
  style_pid=$!
fi

# Compiled files are kept (in the gitignored __pycache__ folders): each pytest worker's import
# of the tests (with pytest's assertion rewriting) and of the code, and every test's own
# Python subprocess, then reuse them instead of compiling everything again each time; a run
# with compiled files at hand collects in a third of the time. An environment that turns
# them off (PYTHONDONTWRITEBYTECODE) is not followed here.
unset PYTHONDONTWRITEBYTECODE

set +e
timeout --signal=ABRT --kill-after=60 "$suite_timeout" \
  .venv/bin/python -m pytest -p no:cacheprovider ${xdist[@]+"${xdist[@]}"} ${pytest_args[@]+"${pytest_args[@]}"}
status=$?
set -e
if [ -n "$style_pid" ]; then
  wait "$style_pid" || style_status=1
  cat "$style_log" >&2
fi
if [ "$status" -eq 124 ] || [ "$status" -eq 134 ] || [ "$status" -eq 137 ]; then
  for f in "$stacks_dir"/stacks-*.txt; do
    [ -s "$f" ] || continue
    echo "---- $(basename "$f" .txt)" >&2
    sed -n '/^Fatal Python error\|+ Timeout +/,$p' "$f" >&2  # the dumps, not the worker's own terminal lines
  done
  echo "the test run passed its bound of ${suite_timeout} s (MCP_SETUP_TEST_SUITE_TIMEOUT) and was stopped: the stacks are above" >&2
  exit 1
fi
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
[ "$status" -eq 0 ] && [ "$style_status" -ne 0 ] && { echo "the tests passed; the style checks above did not" >&2; exit 1; }
exit "$status"
