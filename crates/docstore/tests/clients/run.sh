#!/usr/bin/env bash
# Real MongoDB clients that nobody on this team wrote -- mongosh (npm) and pymongo with gridfs
# (PyPI) -- against the `docstore` binary. CI runs it from the repository root:
#   bash crates/docstore/tests/clients/run.sh
# The clients are installed under $CARGO_TARGET_DIR/clients (default target/clients) on the first
# run and reused afterwards. The last line is "clients: N passed, M failed"; exit status 1 if any
# check failed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
cd "$root"

target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
cache="$target/clients"
mkdir -p "$cache"
work="$(mktemp -d "${TMPDIR:-/tmp}/docstore-clients.XXXXXX")"

log() { printf '== clients: %s\n' "$*"; }

# mongosh must not try to send usage data anywhere (it may in "agentic" sessions); every call
# below also passes --quiet, which skips its update check.
export MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1

# --- servers: start_server / stop_server, and clean-up on exit ------------------------------
# shellcheck source=servers.sh
. "$here/servers.sh"

# --- install the clients ----------------------------------------------------------------------
mongosh="$cache/npm/node_modules/.bin/mongosh"
if ! "$mongosh" --version 2>/dev/null | grep -q '^2\.'; then
  log "installing mongosh@2 from npm into $cache/npm"
  command -v npm >/dev/null || { echo "clients: npm is needed to install mongosh" >&2; exit 1; }
  npm install --no-audit --no-fund --loglevel=error --prefix "$cache/npm" mongosh@2
fi
log "mongosh $("$mongosh" --version)"

# pymongo goes into a venv; where Python has no venv module (Debian without python3-venv) it
# goes into a private directory on PYTHONPATH instead.
python="$cache/venv/bin/python"
pythonpath=""
if "$python" -c 'import pymongo, gridfs' 2>/dev/null; then
  :
elif PYTHONPATH="$cache/pylib" python3 -c 'import pymongo, gridfs' 2>/dev/null; then
  python="python3"
  pythonpath="$cache/pylib"
else
  log "installing pymongo 4 from PyPI"
  if python3 -m venv "$cache/venv" 2>/dev/null && "$python" -m pip --version >/dev/null 2>&1; then
    "$python" -m pip install --quiet --disable-pip-version-check 'pymongo>=4,<5'
  else
    rm -rf "$cache/venv" "$cache/pylib"
    python="python3"
    pythonpath="$cache/pylib"
    python3 -m pip install --quiet --disable-pip-version-check --target "$pythonpath" 'pymongo>=4,<5'
  fi
fi
log "pymongo $(PYTHONPATH="$pythonpath" "$python" -c 'import pymongo; print(pymongo.version)')"

# --- build docstore ---------------------------------------------------------------------------
log "building docstore"
cargo build --quiet -p docstore --bin docstore

# --- the checks -------------------------------------------------------------------------------
passed=0
failed=0
failures=()

# check NAME COMMAND...: runs one client step, bounded in time; its output is shown either way.
check() {
  local name="$1"
  shift
  log "$name"
  local runner=(timeout 300)
  # Shell functions bound their own client calls; `timeout` can only run programs.
  if declare -F "$1" >/dev/null; then runner=(); fi
  if "${runner[@]}" "$@"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("$name")
    echo "clients: FAILED: $name" >&2
  fi
}

# Runs an interactive-style shell helper with --eval and requires its output to contain a line
# matching PATTERN (mongosh's `show` helpers exist only in the shell, not in script files).
mongosh_eval_matches() { # URI PATTERN EXPRESSION...
  local target_uri="$1" pattern="$2"
  shift 2
  local args=() expr out
  for expr in "$@"; do args+=(--eval "$expr"); done
  if ! out="$(timeout 120 "$mongosh" "$target_uri" --quiet "${args[@]}" 2>&1)"; then
    printf '%s\n' "$out" >&2
    return 1
  fi
  printf '%s\n' "$out"
  if ! grep -Eq "$pattern" <<<"$out"; then
    echo "clients: expected output matching /$pattern/" >&2
    return 1
  fi
}

start_server mongosh --in-memory
mongosh_uri="$uri"
check "mongosh: scripted workflow (mongosh_smoke.js)" \
  "$mongosh" "$mongosh_uri" --quiet --file "$here/mongosh_smoke.js"
check "mongosh: show dbs" mongosh_eval_matches "$mongosh_uri" '^clients_show +[0-9.]+ [KMG]?i?B$' \
  'db.getSiblingDB("clients_show").kept.insertOne({ seen: true })' 'show dbs'
check "mongosh: use, show collections" mongosh_eval_matches "$mongosh_uri" '^kept$' \
  'use clients_show' 'show collections'
check "mongosh: db.stats()" mongosh_eval_matches "$mongosh_uri/clients_show" "db: 'clients_show'" \
  'db.stats()'

dbpath="$work/pymongo-data"
start_server pymongo --dbpath "$dbpath"
check "pymongo: CRUD, indexes, bulk_write, GridFS, errors (pymongo_smoke.py)" \
  env PYTHONPATH="$pythonpath" "$python" "$here/pymongo_smoke.py" "$uri"
stop_server "$server_pid"
start_server pymongo-restarted --dbpath "$dbpath"
check "pymongo: data and GridFS files survive a restart" \
  env PYTHONPATH="$pythonpath" "$python" "$here/pymongo_smoke.py" "$uri" --after-restart

# --- authentication: docstore --auth, the password only in DOCSTORE_PASSWORD ----------------
# The password needs percent-escaping in a URI, as real ones often do.
auth_user="clients"
auth_password="s3cret/p@ss:$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
auth_password_escaped="$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$auth_password")"
DOCSTORE_PASSWORD="$auth_password" start_server auth --in-memory --auth --user "$auth_user"
auth_host="${uri#mongodb://}"
auth_uri="mongodb://$auth_user:$auth_password_escaped@$auth_host/?authSource=admin"
check "pymongo --auth: the smoke workflow with user:password@ (SCRAM-SHA-256)" \
  env PYTHONPATH="$pythonpath" "$python" "$here/pymongo_smoke.py" "$auth_uri"
check "pymongo --auth: no credentials is Unauthorized (13), a wrong password AuthenticationFailed (18)" \
  env PYTHONPATH="$pythonpath" "$python" - "$uri" "mongodb://$auth_user:wrong@$auth_host/?authSource=admin" <<'PY'
import sys
import pymongo
from pymongo.errors import OperationFailure

def code_of(uri):
    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10_000)
    try:
        client.clients_auth.orders.find_one()
    except OperationFailure as e:
        return e.code
    finally:
        client.close()
    return None

assert pymongo.MongoClient(sys.argv[1]).admin.command("ping")["ok"] == 1, "ping needs no auth"
assert code_of(sys.argv[1]) == 13, code_of(sys.argv[1])
assert code_of(sys.argv[2]) == 18, code_of(sys.argv[2])
print("pymongo auth errors: ok")
PY
check "pymongo --auth: SCRAM-SHA-1 when asked for" \
  env PYTHONPATH="$pythonpath" "$python" -c \
  'import sys, pymongo; c = pymongo.MongoClient(sys.argv[1] + "&authMechanism=SCRAM-SHA-1"); print(c.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"]); assert c.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"] == [{"user": "clients", "db": "admin"}]' \
  "$auth_uri"
check "mongosh --auth: scripted workflow (mongosh_smoke.js) with user:password@" \
  "$mongosh" "$auth_uri" --quiet --file "$here/mongosh_smoke.js"
check "mongosh --auth: connectionStatus names the user" mongosh_eval_matches "$auth_uri" \
  "user: '$auth_user'" 'db.adminCommand({ connectionStatus: 1 }).authInfo.authenticatedUsers'
check "mongosh --auth: without credentials a read is refused" mongosh_eval_matches "$uri" \
  'requires authentication' \
  'try { db.getSiblingDB("x").y.findOne() } catch (e) { print(e.message) }'
check "docstore --auth: the password appears in no log" \
  bash -c '! grep -qF -- "$1" "$2"' _ "$auth_password" "$work/auth.log"

if [ "$failed" -gt 0 ]; then
  for name in "${failures[@]}"; do echo "clients: failed: $name" >&2; done
  for f in "$work"/*.log; do
    echo "--- $(basename "$f") (last 40 lines)" >&2
    tail -n 40 "$f" >&2 || true
  done
fi
echo "clients: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
