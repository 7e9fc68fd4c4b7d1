#!/usr/bin/env bash
# Makes sure what Cairn and its tests need is installed and answering on this machine:
# NATS with JetStream (127.0.0.1:4222), PostgreSQL (127.0.0.1:5432, role and database `cairn`),
# a Docker engine (/var/run/docker.sock), and Chromium for the dashboard's browser tests. Starts
# what it can; installs from Debian's packages what is absent (needs root). A no-op when
# everything already answers.
set -euo pipefail

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
if ! port_open 4222; then
  command -v nats-server >/dev/null || { log "installing nats-server"; apt_install nats-server; }
  log "starting nats-server with JetStream"
  as_root mkdir -p /var/lib/nats-server
  as_root start-stop-daemon --start --oknodo --background --exec "$(command -v nats-server)" -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
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
  psql_admin -c "create role cairn login createdb password 'cairn'"
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

# --- Chromium -------------------------------------------------------------------------------
# The dashboard's browser tests (apps/dashboard/test) drive Debian's Chromium with playwright-core;
# no browser is ever downloaded by a tool of its own.
if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/lib/chromium/chromium ]; then
  log "installing chromium"
  apt_install chromium
fi

log "NATS, PostgreSQL, Docker and Chromium are there"
