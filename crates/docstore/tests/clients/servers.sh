# Shared by run.sh and suites.sh (sourced, not run): starting and stopping docstore servers.
# The caller sets $target (the cargo target directory), $work (a scratch directory) and a
# `log` function before sourcing this file.

# --- servers: started with --port 0; the URI is read from the line the binary prints ---------
server_pids=()
stop_server() { # pid
  local pid="$1"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local pid
  for pid in "${server_pids[@]}"; do stop_server "$pid"; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_server NAME ARGS...: starts docstore, sets $uri (no trailing slash) and $server_pid.
start_server() {
  local name="$1"
  shift
  local out="$work/$name.out"
  # Created here, not by the background job's redirection, which may run after the first read
  # below (under `set -e` a read of a missing file would end the whole script).
  : >"$out"
  NO_COLOR=1 "$target/debug/docstore" --port 0 "$@" >"$out" 2>"$work/$name.log" &
  server_pid=$!
  server_pids+=("$server_pid")
  uri=""
  for _ in $(seq 1 300); do
    uri="$(sed -n 's|^docstore listening on \(mongodb://[^ ]*\)$|\1|p' "$out" || true)"
    [ -n "$uri" ] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  if [ -z "$uri" ]; then
    echo "clients: docstore ($name) did not start; its log:" >&2
    cat "$work/$name.log" >&2 || true
    exit 1
  fi
  uri="${uri%/}"
  log "docstore ($name) at $uri"
}

