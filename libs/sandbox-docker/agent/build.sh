#!/bin/sh
# Builds the in-sandbox exec agent as one static binary (docs/adr/0005-exec-agent.md).
# Without a C compiler the build goes on: sandboxes then run their steps over `docker exec`.
set -eu
cd "$(dirname "$0")/.."
out=dist/agent/cairn-agent
mkdir -p dist/agent
cc=${CC:-gcc}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "cairn-agent: no C compiler ($cc): steps will use docker exec" >&2
  rm -f "$out"
  exit 0
fi
"$cc" -static -O2 -Wall -Wextra -Werror -o "$out.tmp" agent/cairn-agent.c
mv "$out.tmp" "$out"
