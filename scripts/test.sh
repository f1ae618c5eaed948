#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: installs what the tests need, then pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh -k probe).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs npm)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing ${need_apt[*]} (Debian packages) for the browser and npm tests" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "missing ${need_apt[*]}: install them (sudo apt-get install ${need_apt[*]}) and run again" >&2
    exit 1
  fi
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]"

set +e
.venv/bin/python -m pytest -p no:cacheprovider "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
