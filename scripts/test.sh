#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: installs what the tests need, then pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh -k probe).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs npm)
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)  # the servers' sandbox (README "Sandbox")
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
trap stop_postgres EXIT
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

set +e
.venv/bin/python -m pytest -p no:cacheprovider "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
