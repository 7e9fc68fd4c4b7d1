#!/bin/sh
# Builds the in-sandbox exec agent as one static binary (docs/adr/0005-exec-agent.md), and the
# seccomp probe the tests run inside sandboxes (agent/seccomp-probe.c, freestanding: no libc).
# Without a C compiler the build goes on: sandboxes then run their steps over `docker exec`.
set -eu
cd "$(dirname "$0")/.."
out=dist/agent/cairn-agent
probe=dist/agent/seccomp-probe
mkdir -p dist/agent
cc=${CC:-gcc}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "cairn-agent: no C compiler ($cc): steps will use docker exec" >&2
  rm -f "$out" "$probe"
  exit 0
fi
"$cc" -static -O2 -Wall -Wextra -Werror -o "$out.tmp" agent/cairn-agent.c
mv "$out.tmp" "$out"
"$cc" -static -nostdlib -ffreestanding -fno-stack-protector -fno-pie -no-pie -O2 -s -Wall -Wextra -Werror -o "$probe.tmp" agent/seccomp-probe.c
mv "$probe.tmp" "$probe"
