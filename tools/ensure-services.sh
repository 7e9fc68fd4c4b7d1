#!/usr/bin/env bash
# Makes sure what Cairn and its tests need is installed and answering on this machine:
# NATS with JetStream (127.0.0.1:4222, the version pinned in deploy/nats/VERSION), PostgreSQL (127.0.0.1:5432, role and database `cairn`),
# a Docker engine (/var/run/docker.sock), and Chromium for the dashboard's browser tests. Starts
# what it can; installs from Debian's packages what is absent (needs root). A no-op when
# everything already answers.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

log() { printf '[services] %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then as_root apt-get update -qq; apt_updated=1; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
wait_for() { # what, tries, command...
  local what=$1 tries=$2; shift 2
  for _ in $(seq "$tries"); do "$@" && return 0; sleep 0.5; done
  log "$what did not come up"; return 1
}

# --- NATS with JetStream -------------------------------------------------------------------
# A current nats-server, pinned in deploy/nats/VERSION, built from the Go module proxy once per version
# and cached (never Debian's 2.9: it fsyncs every 60 s and lacks what Cairn uses), started from
# deploy/nats/nats-server.conf. A server already answering on 4222 is used when it is new enough.
nats_version=$(tr -d '[:space:]' < "$repo/deploy/nats/VERSION")
nats_min=2.12.0
nats_cache=${CAIRN_TOOLS_DIR:-/var/cache/cairn}/nats-server/$nats_version
nats_bin=$nats_cache/nats-server
nats_store=${CAIRN_NATS_STORE_DIR:-/var/lib/cairn/nats}
# The version in the INFO line a NATS server sends first on a connection.
nats_running_version() {
  local line
  exec 3<>/dev/tcp/127.0.0.1/4222 || return 1
  IFS= read -r -t 5 line <&3 || { exec 3<&-; return 1; }
  exec 3<&-
  printf '%s' "$line" | sed -n 's/.*"version":"\([^"]*\)".*/\1/p'
}
version_at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }
if [ ! -x "$nats_bin" ]; then
  go=$(command -v go || echo /usr/local/go/bin/go)
  [ -x "$go" ] || { log "go is needed to build nats-server $nats_version (install Go, or put it on PATH)"; exit 1; }
  log "building nats-server $nats_version from the Go module proxy (once per version; 1-3 minutes)"
  as_root mkdir -p "$nats_cache"
  build_dir=$(mktemp -d)
  (cd "$build_dir" && GOBIN="$build_dir" GOFLAGS=-buildvcs=false CGO_ENABLED=0 "$go" install "github.com/nats-io/nats-server/v2@$nats_version")
  as_root install -m 0755 "$build_dir/nats-server" "$nats_bin"
  rm -rf "$build_dir"
fi
# Whether the server's monitoring endpoint (127.0.0.1:8222, as deploy/nats/nats-server.conf sets it) says it
# fsyncs every write before acknowledging it (deploy/nats/sync.conf); empty when it does not answer.
nats_sync_always() {
  local reply
  exec 4<>/dev/tcp/127.0.0.1/8222 || return 1
  printf 'GET /varz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&4
  reply=$(timeout 5 cat <&4 || true)
  exec 4<&-
  case "$reply" in *'"sync_always": true'*) echo yes ;; *'"jetstream"'*) echo no ;; esac
}
if port_open 4222; then
  running=$(nats_running_version || true)
  if [ -z "$running" ] || ! version_at_least "$running" "$nats_min"; then
    log "a NATS server ${running:-of unknown version} answers on 127.0.0.1:4222; Cairn needs $nats_min or newer."
    log "stop it (Debian's: systemctl stop nats-server) and run this script again: it starts nats-server $nats_version from $nats_bin"
    exit 1
  fi
  if port_open 8222 && [ "$(nats_sync_always || true)" = no ]; then
    log "warning: the NATS server on 127.0.0.1:4222 acknowledges writes before they are on disk (no sync_interval: always);"
    log "an OS crash can lose acknowledged receipts. Restart it with deploy/nats/nats-server.conf (docs/adr/0014-durable-by-default.md)"
  fi
else
  log "starting nats-server $nats_version with JetStream (store $nats_store)"
  as_root mkdir -p "$nats_store"
  as_root start-stop-daemon --start --oknodo --background --make-pidfile --pidfile /run/cairn-nats-server.pid \
    --exec "$nats_bin" -- -c "$repo/deploy/nats/nats-server.conf" -sd "$nats_store" -l /var/log/cairn-nats-server.log
  wait_for "nats-server" 40 port_open 4222
fi

# --- PostgreSQL ------------------------------------------------------------------------------
if ! port_open 5432; then
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then log "installing postgresql"; apt_install postgresql; fi
  log "starting postgresql"
  as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main start || true
  wait_for "postgresql" 60 port_open 5432
fi
psql_admin() { (cd / && as_root runuser -u postgres -- psql -v ON_ERROR_STOP=1 -qAtX "$@"); }
if ! psql_admin -c "select 1 from pg_roles where rolname='cairn'" | grep -q 1; then
  log "creating role cairn"
  psql_admin -c "create role cairn login createdb createrole password 'cairn'"
fi
# CREATEROLE: `cairn up` makes each service's role of its stack's database (docs/adr/0032).
if ! psql_admin -c "select 1 from pg_roles where rolname='cairn' and rolcreaterole" | grep -q 1; then
  log "letting role cairn create roles"
  psql_admin -c "alter role cairn createrole"
fi
if ! psql_admin -c "select 1 from pg_database where datname='cairn'" | grep -q 1; then
  log "creating database cairn"
  psql_admin -c "create database cairn owner cairn"
fi

# --- Docker engine ---------------------------------------------------------------------------
docker_up() { docker version --format '{{.Server.APIVersion}}' >/dev/null 2>&1; }
if ! docker_up; then
  command -v dockerd >/dev/null || { log "installing docker.io"; apt_install docker.io; }
  log "starting dockerd"
  as_root sh -c 'nohup dockerd >/var/log/dockerd.log 2>&1 &'
  wait_for "dockerd" 120 docker_up
fi
# The minimal sandbox image is built locally from a static busybox (no registry here).
if ! dpkg -s busybox-static >/dev/null 2>&1; then
  log "installing busybox-static"
  apt_install busybox-static
fi

# The two-worker fault test (apps/cli/test/two-workers.fault.spec.ts) puts a worker in a network
# namespace of its own, joined by a veth pair: `ip` from iproute2.
if ! command -v ip >/dev/null 2>&1; then
  log "installing iproute2"
  apt_install iproute2
fi

# --- faketime -------------------------------------------------------------------------------
# The clock-skew fault test (apps/cli/test/clock-skew.fault.spec.ts, ADR 0033) runs runtimes a
# minute behind and ahead of the machine's clock with Debian's libfaketime.
if ! command -v faketime >/dev/null 2>&1; then
  log "installing faketime"
  apt_install faketime
fi

# --- Chromium -------------------------------------------------------------------------------
# The dashboard's browser tests (apps/dashboard/test) drive Debian's Chromium with playwright-core;
# no browser is ever downloaded by a tool of its own.
if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/lib/chromium/chromium ]; then
  log "installing chromium"
  apt_install chromium
fi

log "NATS, PostgreSQL, Docker and Chromium are there"
