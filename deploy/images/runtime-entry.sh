#!/bin/sh
# The runtime in a container (docker-compose.yml): started as root only to lay out what the host's
# engine binds into every sandbox, then the runtime as uid 10001 with the Docker socket's group and no
# capabilities. CAIRN_AGENT_DIR is a host directory mounted at the same path (the engine resolves the
# paths of a sandbox's binds on the host): the exec agent's binary goes there, and its socket root.
set -eu
agent_dir=${CAIRN_AGENT_DIR:?CAIRN_AGENT_DIR: a host directory mounted at the same path}
socket=${CAIRN_DOCKER_SOCKET:-/var/run/docker.sock}
[ -S "$socket" ] || { echo "cairn-runtime: no Docker socket at $socket (mount the host's)" >&2; exit 1; }
chown 0:0 "$agent_dir"
chmod 0755 "$agent_dir"
install -m 0755 -o 0 -g 0 /app/libs/sandbox-docker/dist/agent/cairn-agent "$agent_dir/cairn-agent.new"
mv -f "$agent_dir/cairn-agent.new" "$agent_dir/cairn-agent"
install -d -o 10001 -g 10001 -m 0700 "$agent_dir/sockets"
export CAIRN_AGENT_BINARY="$agent_dir/cairn-agent" CAIRN_AGENT_SOCKET_ROOT="$agent_dir/sockets"
exec setpriv --reuid=10001 --regid=10001 --groups="$(stat -c %g "$socket")" --inh-caps=-all --bounding-set=-all --no-new-privs -- node apps/runtime/dist/main.js
