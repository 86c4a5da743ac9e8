#!/usr/bin/env bash
# What keeping metrics costs a page: two release-build instances on in-memory stores with the
# same demo catalog, one with `metrics.token` set (metrics kept, database commands timed) and one
# without, loaded in alternating rounds by wrk (so drift on a shared machine hits both alike).
# Prints each round's requests/s, the medians and the on/off ratio per page.
#
# Usage (from the repository root):
#   benches/metrics_overhead.sh
# Settings: BENCH_SECONDS per wrk run (default 5), BENCH_ROUNDS (default 3), BENCH_CONNECTIONS
# (default 64), BENCH_THREADS (wrk threads, default 2), BENCH_PORT (first of two ports, default
# 18180), BAZAAR_BIN (default target/release/bazaar, built if missing). Needs wrk and curl.
set -euo pipefail

cd "$(dirname "$0")/.."
SECONDS_EACH=${BENCH_SECONDS:-5}
ROUNDS=${BENCH_ROUNDS:-3}
CONNECTIONS=${BENCH_CONNECTIONS:-64}
THREADS=${BENCH_THREADS:-2}
PORT=${BENCH_PORT:-18180}
BIN=${BAZAAR_BIN:-target/release/bazaar}
TOKEN=metrics-overhead-bench-token

command -v wrk >/dev/null || { echo "needs wrk (apt-get install -y wrk)" >&2; exit 1; }
[ -x "$BIN" ] || cargo build --release

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

start() { # name port [token]
  local name=$1 port=$2 token=${3:-}
  mkdir -p "$WORK/$name"
  (cd "$WORK/$name" && exec env -u RUST_LOG BAZAAR_DATABASE__URI=memory BAZAAR_SERVER__PORT="$port" \
    BAZAAR_LOG__LEVEL=error BAZAAR_METRICS__TOKEN="$token" BAZAAR_ANALYTICS__ENABLED=false \
    "$OLDPWD/$BIN" serve >"$WORK/$name.log" 2>&1) &
  PIDS+=($!)
  for _ in $(seq 1 300); do
    curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "$name did not start:" >&2; cat "$WORK/$name.log" >&2; exit 1
}

if curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 || curl -fs "http://127.0.0.1:$((PORT + 1))/healthz" >/dev/null 2>&1; then
  echo "something already listens on $PORT or $((PORT + 1)): set BENCH_PORT" >&2; exit 1
fi
start off "$PORT"
start on "$((PORT + 1))" "$TOKEN"
PRODUCT=$(curl -fs "http://127.0.0.1:$PORT/products" | grep -o 'href="/products/[^"?]*"' | head -1 | cut -d'"' -f2)
PAGES=("$PRODUCT" "/products" "/")

rate() { # port path
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"${SECONDS_EACH}s" "http://127.0.0.1:$1$2" \
    | awk '/Requests\/sec/ {print $2}'
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "metrics off vs on, $ROUNDS rounds of ${SECONDS_EACH}s, $CONNECTIONS connections"
for page in "${PAGES[@]}"; do
  : >"$WORK/off.txt"; : >"$WORK/on.txt"
  for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) -eq 1 ]; then order="off on"; else order="on off"; fi
    for which in $order; do
      port=$PORT; [ "$which" = on ] && port=$((PORT + 1))
      r=$(rate "$port" "$page"); echo "$r" >>"$WORK/$which.txt"
      printf '  %-24s round %d %-3s %10s req/s\n' "$page" "$round" "$which" "$r"
    done
  done
  off=$(median <"$WORK/off.txt"); on=$(median <"$WORK/on.txt")
  awk -v p="$page" -v off="$off" -v on="$on" \
    'BEGIN { printf "%-26s median off %10.0f  on %10.0f  on/off %.3f\n", p, off, on, on / off }'
done
# The instance with metrics really kept them.
curl -fs -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$((PORT + 1))/metrics" \
  | grep -c '^bazaar_http_requests_total' | xargs echo "series of bazaar_http_requests_total:"
