#!/usr/bin/env bash
# Scale benchmark: for each catalog size, seed that many generated products into a temporary
# data directory with the release binary, start the server on it, and report
#   - seeding time and peak RSS, data directory size,
#   - start-up time until /healthz answers, what /readyz first says is pending and the time
#     until it answers 200, RSS after start and after the load,
#   - the first request of each page right after start-up (cold),
#   - requests/s with p50/p99 (wrk, 2 threads, 64 connections) for the first, middle and last
#     page of /products and of the largest category, a deep keyset page (Next from the middle
#     page), the same three pages of a filtered listing (SCALE_FILTER), and a product page,
#   - the sitemap index's time (a walk over every product on sale) and the first product
#     sitemap's (50 000 URLs), with the RSS after them,
#   - right after /healthz answers, when a deep numbered page (the middle of /products and of
#     the category) first answers with content, counted from the server's start,
#   - the filtered listing's first page under load for SCALE_SERIES seconds (default 60) in
#     back-to-back 5 s windows, each window's req/s, p50, p99 and maximum: a periodic stall
#     (a recount holding the store) shows as a window with a high p99,
#   - with SCALE_CORES (e.g. "1 2"), for each core count a server pinned to that many cores
#     (taskset) and wrk pinned to the others, req/s of a product page and of /blog/; when no core
#     is left for wrk it shares the server's (the line says so).
#   - site search (`/search?q=`): how long the first search after start-up takes and what it
#     answers, one idle search of each kind, then requests/s with p50/p99/max for single words,
#     several words, a phrase and a negation, every request a query not asked before (see
#     benches/load/search_queries.lua: the result cache answers none of them), then a
#     realistic mix (popular searches repeated, Zipf-like, so the cache answers some), and a
#     product page's p99 alone and while a search load runs beside it (SCALE_SEARCH=0 leaves
#     search out).
#
# Usage (from the repository root):
#   benches/scale.sh                      # 10 000 and 100 000 products
#   SCALE_PRODUCTS="100000 1000000" SCALE_SECONDS=15 benches/scale.sh
# Settings: SCALE_PRODUCTS (space-separated sizes), SCALE_SECONDS (per wrk run, default 10),
# SCALE_CONNECTIONS (default 64), SCALE_CATEGORY (default music, the demo tree's largest),
# SCALE_FILTER (a /products query string, default type=album&in_stock=1),
# SCALE_PORT (default 18080), BAZAAR_BIN (default target/release/bazaar, built if missing),
# SCALE_POSTS (generated blog posts seeded with the products, default 0),
# SCALE_ONLY=search (skip the listing pages and sitemaps: start-up, then search),
# SCALE_DATA (a data directory already seeded with one size: measured as it is, not seeded, and
# kept; give SCALE_PRODUCTS the size it holds), SCALE_ONLY (all, the default; series: start-up,
# deep pages after start and the 5 s windows only; scaling: the per-core figures only; each part
# stays well under ten minutes at 1 000 000 products on 2 cores), SCALE_SERIES (seconds of 5 s
# windows), SCALE_CORES (core counts for the scaling figures, default: all the machine's),
# SCALE_KEEP_LOG (a file the last server's log is copied to, to read what a slow window held).
# Needs wrk and curl. The machine's other load skews the figures: compare runs made together.
set -euo pipefail

cd "$(dirname "$0")/.."
PRODUCTS=${SCALE_PRODUCTS:-"10000 100000"}
SECONDS_EACH=${SCALE_SECONDS:-10}
CONNECTIONS=${SCALE_CONNECTIONS:-64}
CATEGORY=${SCALE_CATEGORY:-music}
FILTER=${SCALE_FILTER:-type=album&in_stock=1}
PORT=${SCALE_PORT:-18080}
POSTS=${SCALE_POSTS:-0}
SEARCH=${SCALE_SEARCH:-1}
SEARCH_SCRIPT="$(pwd)/benches/load/search_queries.lua"
BIN=${BAZAAR_BIN:-target/release/bazaar}
BASE="http://127.0.0.1:$PORT"
ONLY=${SCALE_ONLY:-all}
SERIES=${SCALE_SERIES:-60}
ALL_CORES=$(nproc)
CORES=${SCALE_CORES:-$ALL_CORES}

command -v wrk >/dev/null || { echo "scale.sh needs wrk (apt-get install -y wrk)" >&2; exit 1; }
command -v taskset >/dev/null || { echo "scale.sh needs taskset (util-linux)" >&2; exit 1; }
if [ ! -x "$BIN" ]; then
  cargo build --release
fi

SERVER=""
WORK=""
# With SCALE_KEEP_LOG, the server's log outlives the work directory.
keep_log() {
  if [ -n "${SCALE_KEEP_LOG:-}" ] && [ -f "$WORK/server.log" ]; then cp "$WORK/server.log" "$SCALE_KEEP_LOG"; fi
}
cleanup() {
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  if [ -n "$WORK" ]; then keep_log; rm -rf "$WORK"; fi
}
trap cleanup EXIT

# Another server on the port would answer /healthz and be measured instead of ours.
if curl -s -o /dev/null "$BASE/healthz"; then
  echo "something already listens on port $PORT: set SCALE_PORT to a free one" >&2
  exit 1
fi

rss_mb() { awk '/VmRSS/ { printf "%d", $2 / 1024 }' "/proc/$1/status"; }
# The RSS split as the kernel counts it (smaps_rollup): anonymous memory, file pages, and memory
# freed with MADV_FREE that still counts until the kernel takes it back (LazyFree).
memory_of() {
  awk '/^(Rss|Anonymous|LazyFree|Private_Dirty|AnonHugePages):/ { printf "%s %d MB  ", $1, $2 / 1024 }' "/proc/$1/smaps_rollup"
}

# The listing total shown on a saved page ("of <strong class="total">N</strong>").
total_of() { sed -n 's/.*class="total">\([0-9]*\)<.*/\1/p' "$1" | head -1; }
# Fetch a page into a file; prints how long it took.
fetch() { curl -sf -o "$2" -w '%{time_total}' "$BASE$1"; }
# Fetch a deep page, which answers 503 "being prepared" (Retry-After) until its listing's page
# anchors are walked: prints the first answer's status and time, and when it was served.
fetch_ready() {
  local first began=$(date +%s.%N)
  first=$(curl -s -o "$2" -w '%{http_code} in %{time_total} s' "$BASE$1")
  until [ "$(curl -s -o "$2" -w '%{http_code}' "$BASE$1")" = 200 ]; do sleep 0.1; done
  echo "$first, served after $(echo "$(date +%s.%N) - $began" | bc | cut -c1-5) s"
}

# The cores wrk runs on: those the server does not have, or (none left) the server's own.
CLIENT_CPUS="0-$((ALL_CORES - 1))"
# One wrk run of $2 seconds (default SECONDS_EACH): "req/s p50 p99", with the maximum when $3 is set.
load() {
  taskset -c "$CLIENT_CPUS" wrk -t2 -c"$CONNECTIONS" -d"${2:-$SECONDS_EACH}s" --timeout 10s --latency "$BASE$1" |
    awk -v max="${3:-}" '/Requests\/sec/ { rps = $2 }
         /^ +50%/ { p50 = $2 } /^ +99%/ { p99 = $2 } /^ +Latency +[0-9]/ { top = $4 }
         /Non-2xx|Socket errors/ { errors = errors " " $0 }
         END { printf "%8.0f req/s  p50 %-8s p99 %-8s%s%s", rps, p50, p99, (max ? "max " top : ""), errors }'
}

# Start the server pinned to the first $1 cores (all when empty) on $DATA; sets SERVER and the
# start time STARTED, and waits for /healthz.
start_server() {
  local cpus="0-$(( ${1:-$ALL_CORES} - 1 ))"
  STARTED=$(date +%s.%N)
  taskset -c "$cpus" "$BIN" serve >"$WORK/server.log" 2>&1 &
  SERVER=$!
  until curl -sf "$BASE/healthz" >/dev/null; do
    kill -0 "$SERVER" 2>/dev/null || { echo "the server exited:"; cat "$WORK/server.log"; exit 1; }
    sleep 0.05
  done
}
stop_server() {
  kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
  SERVER=""
}
since_start() { echo "$(date +%s.%N) - $STARTED" | bc | cut -c1-5; }
# Poll $1 until it answers 200: prints the first answer's status and when content came, counted
# from the server's start.
deep_after_start() {
  local first
  first=$(curl -s -o /dev/null -w '%{http_code} at' "$BASE$1")
  first="$first $(since_start) s"
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE$1")" = 200 ]; do
    if [ "$(echo "$(since_start) > 300" | bc)" = 1 ]; then echo "first $first; no content after 300 s"; return; fi
    sleep 0.2
  done
  echo "first $first; content at $(since_start) s after start"
}

# A wrk run of searches (SEARCH_FAMILY: single, several, phrase, negation, each request a
# search not asked before; mix, popular searches repeated): "req/s p50 p99 max", and for the
# mix how many requests repeated an earlier search.
load_search() {
  wrk -t2 -c"$CONNECTIONS" -d"${SECONDS_EACH}s" --timeout 10s --latency -s "$SEARCH_SCRIPT" "$BASE/" |
    awk '/Requests\/sec/ { rps = $2 }
         /^ +Latency +[0-9]/ { max = $4 }
         /^ +50%/ { p50 = $2 } /^ +99%/ { p99 = $2 }
         /Non-2xx|Socket errors/ { errors = errors " " $0 }
         /^mix: / { sub(/^mix: /, ""); repeats = " (" $0 ")" }
         END { printf "%8.0f req/s  p50 %-8s p99 %-8s max %-8s%s%s", rps, p50, p99, max, errors, repeats }'
}

# Wait until requests still queued from a run have drained (/healthz answers quickly again).
drain() {
  for _ in $(seq 1 600); do
    t=$(curl -sf -o /dev/null -w '%{time_total}' "$BASE/healthz" || echo 9)
    [ "$(echo "$t < 0.05" | bc)" = 1 ] && break
    sleep 0.1
  done
}

for N in $PRODUCTS; do
  WORK=$(mktemp -d)
  DATA=${SCALE_DATA:-$WORK/data}
  export BAZAAR_DATABASE__URI=embedded BAZAAR_DATABASE__PATH="$DATA"
  export BAZAAR_SERVER__HOST=127.0.0.1 BAZAAR_SERVER__PORT=$PORT BAZAAR_LOG__LEVEL=${SCALE_LOG_LEVEL:-warn}
  # Every wrk connection comes from one address: the per-client search allowance (30 a
  # minute) would answer nearly all of them 429.
  export BAZAAR_SEARCH__PER_CLIENT_PER_MINUTE=1000000
  echo "== $N generated products (plus the demo catalog) =="
  if [ -z "${SCALE_DATA:-}" ]; then
    /usr/bin/time -f "%e %M" -o "$WORK/seed.time" "$BIN" seed --products "$N" --posts "$POSTS" >/dev/null 2>"$WORK/seed.log"
    read -r seed_s seed_kb <"$WORK/seed.time"
    echo "seeding: ${seed_s} s, peak RSS $((seed_kb / 1024)) MB; data directory $(du -sh "$DATA" | cut -f1)"
  else
    echo "seeded beforehand in $DATA: data directory $(du -sh "$DATA" | cut -f1)"
  fi

  if [ "$ONLY" = scaling ]; then
    for cores in $CORES; do
      if [ "$cores" -lt "$ALL_CORES" ]; then
        CLIENT_CPUS="$cores-$((ALL_CORES - 1))"; shared=""
      else
        CLIENT_CPUS="0-$((ALL_CORES - 1))"; shared=" (wrk shares the server's cores: none left for it)"
      fi
      start_server "$cores"
      # The background text index build would share the cores with the measured pages.
      until curl -sf "$BASE/readyz" >/dev/null; do sleep 0.2; done
      fetch "/products" "$WORK/first.html" >/dev/null
      product=$(sed -n 's/.*class="product-title"><a href="\([^"]*\)".*/\1/p' "$WORK/first.html" | head -1)
      fetch "$product" /dev/null >/dev/null; fetch "/blog/" /dev/null >/dev/null
      echo "server on $cores core(s), wrk on cores $CLIENT_CPUS$shared:"
      printf '  %-14s %s\n' "product page" "$(load "$product")"
      printf '  %-14s %s\n' "/blog/" "$(load "/blog/")"
      stop_server
    done
    CLIENT_CPUS="0-$((ALL_CORES - 1))"
    keep_log; rm -rf "$WORK"; WORK=""
    continue
  fi

  start_server
  started=$STARTED
  ready=$(date +%s.%N)
  echo "start-up to /healthz: $(echo "$ready - $started" | bc) s; RSS $(rss_mb "$SERVER") MB"
  if [ "$ONLY" != search ]; then
    # Deep numbered pages right after start: page anchors are walked (or read back from the
    # database) before such a page has content; until then it answers 503 "being prepared".
    # The very first requests after start-up count the listing totals.
    cold_all=$(fetch "/products" "$WORK/first.html")
    cold_cat=$(fetch "/categories/$CATEGORY" "$WORK/cat.html")
    early_pages=$(( ($(total_of "$WORK/first.html") + 11) / 12 ))
    early_cat_pages=$(( ($(total_of "$WORK/cat.html") + 11) / 12 ))
    echo "deep page after start: /products?page=$((early_pages / 2)): $(deep_after_start "/products?page=$((early_pages / 2))")"
    echo "deep page after start: /categories/$CATEGORY?page=$((early_cat_pages / 2)): $(deep_after_start "/categories/$CATEGORY?page=$((early_cat_pages / 2))")"
  fi
  if [ "$SEARCH" = 1 ]; then
    # Straight after start-up, before the text index build ends: what a visitor searching gets.
    first_search=$(curl -s -o "$WORK/first-search.html" -w '%{http_code} in %{time_total} s' "$BASE/search?q=jazz")
    echo "first search after start: $first_search ($(grep -o 'being prepared\|Search is busy\|class="total">[0-9]*' "$WORK/first-search.html" | head -1))"
    began=$(date +%s.%N)
    until [ "$(curl -s -o "$WORK/first-search.html" -w '%{http_code}' "$BASE/search?q=jazz+piano")" = 200 ]; do sleep 0.1; done
    echo "first search answered 200: $(echo "$(date +%s.%N) - $started" | bc | cut -c1-5) s after start"
  fi
  # /readyz is 503 while start-up work a page needs (the background text index build) runs.
  first_ready=$(curl -s "$BASE/readyz")
  echo "first /readyz: $first_ready"
  until curl -sf "$BASE/readyz" >/dev/null; do sleep 0.1; done
  echo "start-up to /readyz 200: $(echo "$(date +%s.%N) - $started" | bc) s"

  if [ "$ONLY" != search ]; then
  fetch "/products" "$WORK/first.html" >/dev/null
  fetch "/categories/$CATEGORY" "$WORK/cat.html" >/dev/null
  cold_filtered=$(fetch "/products?$FILTER" "$WORK/filtered.html")
  all=$(total_of "$WORK/first.html")
  pages=$(( (all + 11) / 12 ))
  in_category=$(total_of "$WORK/cat.html")
  cat_pages=$(( (in_category + 11) / 12 ))
  filtered=$(total_of "$WORK/filtered.html")
  filtered_pages=$(( (filtered + 11) / 12 ))
  echo "first request after start: /products ${cold_all} s, /categories/$CATEGORY ${cold_cat} s, /products?$FILTER ${cold_filtered} s"
  echo "listing: $all products ($pages pages); /categories/$CATEGORY: $in_category ($cat_pages pages); /products?$FILTER: $filtered ($filtered_pages pages)"
  next_link() { sed -n 's/.*rel="next" href="\([^"]*\)".*/\1/p' "$1" | head -1 | sed 's/&amp;/\&/g'; }
  echo "first middle page=N: /products $(fetch_ready "/products?page=$((pages / 2))" "$WORK/middle.html")"
  keyset=$(next_link "$WORK/middle.html")
  product=$(sed -n 's/.*class="product-title"><a href="\([^"]*\)".*/\1/p' "$WORK/middle.html" | head -1)
  echo "first middle page=N: /categories/$CATEGORY $(fetch_ready "/categories/$CATEGORY?page=$((cat_pages / 2))" "$WORK/cat-middle.html")"
  echo "first middle page=N: /products?$FILTER $(fetch_ready "/products?$FILTER&page=$((filtered_pages / 2))" /dev/null)"
  cat_keyset=$(next_link "$WORK/cat-middle.html")

  if [ "$SERIES" -gt 0 ]; then
    echo "/products?$FILTER under load in 5 s windows (since start: $(since_start) s):"
    for w in $(seq 1 $((SERIES / 5))); do
      printf '  window %2d  %s\n' "$w" "$(load "/products?$FILTER" 5 max)"
    done
  fi
  if [ "$ONLY" = series ]; then
    echo "RSS after the load: $(rss_mb "$SERVER") MB ($(memory_of "$SERVER"))"
    stop_server
    keep_log; rm -rf "$WORK"; WORK=""
    echo
    continue
  fi

  urls=(
    "/products"
    "/products?page=$((pages / 2))"
    "/products?page=$pages"
    "$keyset"
    "/categories/$CATEGORY"
    "/categories/$CATEGORY?page=$((cat_pages / 2))"
    "/categories/$CATEGORY?page=$cat_pages"
    "$cat_keyset"
    "/products?$FILTER"
    "/products?$FILTER&page=$((filtered_pages / 2))"
    "/products?$FILTER&page=$filtered_pages"
    "$product"
  )
  names=(
    "products first" "products middle (page=N)" "products last" "products keyset deep"
    "category first" "category middle (page=N)" "category last" "category keyset deep"
    "filtered first" "filtered middle (page=N)" "filtered last"
    "product page"
  )
  for i in "${!urls[@]}"; do
    single=$(fetch "${urls[$i]}" /dev/null)
    printf '%-26s single %5.3f s  %s\n' "${names[$i]}" "$single" "$(load "${urls[$i]}")"
    # Let requests still queued from the run drain before the next page's single request.
    for _ in $(seq 1 600); do
      t=$(curl -sf -o /dev/null -w '%{time_total}' "$BASE/healthz" || echo 9)
      [ "$(echo "$t < 0.05" | bc)" = 1 ] && break
      sleep 0.1
    done
  done
  echo "RSS after the load: $(rss_mb "$SERVER") MB"

  # Sitemaps: the index walks every product on sale once through a cursor; a product sitemap
  # is one keyset read of at most 50 000. Peak memory shows as the RSS growth.
  index_time=$(fetch "/sitemap.xml" "$WORK/sitemap.xml")
  children=$(grep -c '<loc>' "$WORK/sitemap.xml")
  first_chunk=$(sed -n 's|.*<loc>[a-z]*://[^/]*\(/sitemaps/products-[0-9a-f]*\.xml\)</loc>.*|\1|p' "$WORK/sitemap.xml" | head -1)
  chunk_time=$(fetch "$first_chunk" "$WORK/products-sitemap.xml")
  echo "sitemap index: ${index_time} s, $children sitemaps; first product sitemap: ${chunk_time} s, $(grep -c '<loc>' "$WORK/products-sitemap.xml") URLs, $(du -k "$WORK/products-sitemap.xml" | cut -f1) KB; RSS after: $(rss_mb "$SERVER") MB"
  fi

  if [ "$SEARCH" = 1 ]; then
    # One search of each kind with nothing else running (queries no earlier request asked).
    for q in "coltrane" "miles+davis+session" "%22the+second+chorus%22" "jazz+-blue"; do
      printf 'idle search %-28s %s s\n' "$q" "$(fetch "/search?q=$q" /dev/null)"
    done
    # Every request new (the result cache answers none), then the realistic mix.
    for family in single several phrase negation mix; do
      printf '%-26s %s\n' "search $family" "$(SEARCH_FAMILY=$family load_search)"
      drain
    done
    if [ -z "${product:-}" ]; then
      fetch "/products" "$WORK/first.html" >/dev/null || true
      product=$(sed -n 's/.*class="product-title"><a href="\([^"]*\)".*/\1/p' "$WORK/first.html" | head -1)
    fi
    product=${product:-/products}
    printf '%-26s %s\n' "product page alone" "$(load "$product")"
    drain
    # The same page while 16 more connections search (distinct phrase queries) beside it.
    SEARCH_FAMILY=phrase CONNECTIONS=16 load_search >"$WORK/beside.txt" &
    beside=$!
    sleep 1
    printf '%-26s %s\n' "product page + searches" "$(load "$product")"
    wait "$beside"
    printf '%-26s %s\n' "  (the searches beside it)" "$(cat "$WORK/beside.txt")"
    drain
    echo "RSS after search: $(rss_mb "$SERVER") MB"
  fi
  stop_server
  keep_log; rm -rf "$WORK"; WORK=""
  echo
done
