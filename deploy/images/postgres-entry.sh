#!/bin/bash
# PostgreSQL in the compose stack. On the first start (an empty data volume): a cluster whose role
# `cairn`, with the password from the key file (`cairn init-keys`: db/password), owns database
# `cairn`, reachable over TCP by password (scram-sha-256) only. Then the server, as user postgres.
# Started as root only to read the key file and hand the data directory over; never runs as root.
set -euo pipefail
pw_file=${CAIRN_DB_PASSWORD_FILE:-/run/cairn/db/password}
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups --inh-caps=-all --bounding-set=-all -- "$@"; }
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  [ -s "$pw_file" ] || { echo "cairn-postgres: no database password in $pw_file (cairn init-keys makes it)" >&2; exit 1; }
  password=$(tr -d '\n' < "$pw_file")
  [[ $password =~ ^[0-9a-f]{16,}$ ]] || { echo "cairn-postgres: $pw_file does not hold a hex password" >&2; exit 1; }
  install -d -o postgres -g postgres -m 0700 "$PGDATA"
  as_postgres initdb -D "$PGDATA" -U postgres --auth-local=peer --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null
  printf "CREATE ROLE cairn LOGIN CREATEDB CREATEROLE PASSWORD '%s';\nCREATE DATABASE cairn OWNER cairn;\n" "$password" | as_postgres postgres --single -D "$PGDATA" postgres >/dev/null
  printf 'host all all all scram-sha-256\n' >> "$PGDATA/pg_hba.conf"
fi
# The admin makes each service's role (`cairn db-roles`, ADR 0032): CREATEROLE, on every start, so a volume made
# before roles gets it too. Single-user mode, before the server listens.
echo 'ALTER ROLE cairn CREATEROLE;' | as_postgres postgres --single -D "$PGDATA" postgres >/dev/null
exec setpriv --reuid=postgres --regid=postgres --init-groups --inh-caps=-all --bounding-set=-all -- postgres -D "$PGDATA" -c listen_addresses='*'
