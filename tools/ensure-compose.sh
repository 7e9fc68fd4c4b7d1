#!/usr/bin/env bash
# Makes sure what the compose stack (docker-compose.yml, `cairn images build --stack`) needs is on this
# machine, beside what tools/ensure-services.sh installs: docker-compose (Debian's 1.29), debootstrap (the
# stack's Debian base image), and the nats-server pinned in deploy/nats/VERSION (built from the Go module
# proxy and cached, as ensure-services.sh does). Installs from Debian's packages what is absent (needs
# root); a no-op when everything is there. docs/operations.md and docs/adr/0023-stack-images.md say why.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

log() { printf '[compose] %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then as_root apt-get update -qq; apt_updated=1; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

command -v docker >/dev/null 2>&1 || { log "no docker CLI: run tools/ensure-services.sh first (it installs and starts the engine)"; exit 1; }
if ! command -v docker-compose >/dev/null 2>&1; then log "installing docker-compose"; apt_install docker-compose; fi
if ! command -v debootstrap >/dev/null 2>&1; then log "installing debootstrap"; apt_install debootstrap; fi

# The same build as tools/ensure-services.sh: the stack's NATS image is made from this binary.
nats_version=$(tr -d '[:space:]' < "$repo/deploy/nats/VERSION")
nats_bin=${CAIRN_TOOLS_DIR:-/var/cache/cairn}/nats-server/$nats_version/nats-server
if [ ! -x "$nats_bin" ]; then
  go=$(command -v go || echo /usr/local/go/bin/go)
  [ -x "$go" ] || { log "go is needed to build nats-server $nats_version (install Go, or put it on PATH)"; exit 1; }
  log "building nats-server $nats_version from the Go module proxy (once per version; 1-3 minutes)"
  as_root mkdir -p "$(dirname "$nats_bin")"
  build_dir=$(mktemp -d)
  (cd "$build_dir" && GOBIN="$build_dir" GOFLAGS=-buildvcs=false CGO_ENABLED=0 "$go" install "github.com/nats-io/nats-server/v2@$nats_version")
  as_root install -m 0755 "$build_dir/nats-server" "$nats_bin"
  rm -rf "$build_dir"
fi

log "docker-compose $(docker-compose version --short 2>/dev/null || echo '?'), debootstrap and nats-server $nats_version are there"
