#!/usr/bin/env bash
# Makes sure the repository's Python virtual environment (.venv, ignored by git) exists and holds the
# Python SDK (sdk/python, editable) with its test dependencies, pinned in sdk/python/requirements-lock.txt,
# all from PyPI. Needs a python3 of at least 3.10 (Debian 12's is 3.11). A no-op when nothing changed:
# it reinstalls only when the lock file or the SDK's pyproject.toml differ from what was installed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${CAIRN_PYTHON_VENV:-$repo/.venv}
lock=$repo/sdk/python/requirements-lock.txt
stamp=$venv/.cairn-installed

log() { printf '[python] %s\n' "$*" >&2; }

python=${PYTHON:-python3}
# A fresh Debian may have no python3, or one without venv and ensurepip (a package of its own): installed
# from Debian's packages as tools/ensure-services.sh installs the rest (root or sudo).
if ! "$python" -c 'import ensurepip, venv' 2>/dev/null && [ -z "${PYTHON:-}" ] && command -v apt-get >/dev/null; then
  log "installing python3 and python3-venv from Debian's packages"
  as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
fi
if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
  log "needs python3 >= 3.10 (found: $("$python" --version 2>&1 || echo none))"
  exit 1
fi

want=$(cat "$lock" "$repo/sdk/python/pyproject.toml" | sha256sum | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
  log "creating $venv ($("$python" --version 2>&1))"
  "$python" -m venv "$venv"
fi
log "installing the Python SDK and its test dependencies into $venv"
install_log=$venv/.cairn-install.log
if ! { "$venv/bin/python" -m pip install --disable-pip-version-check --upgrade pip &&
  "$venv/bin/python" -m pip install --disable-pip-version-check -r "$lock" -e "$repo/sdk/python[test]"; } >"$install_log" 2>&1; then
  tail -n 40 "$install_log" >&2
  log "pip failed (the whole log: $install_log)"
  exit 1
fi
printf '%s' "$want" > "$stamp"
log "ready: $("$venv/bin/python" -c 'import cairn_sdk, inspect_ai; print("cairn_sdk", cairn_sdk.__version__, "inspect_ai", inspect_ai.__version__)')"
