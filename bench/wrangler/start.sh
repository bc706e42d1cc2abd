#!/usr/bin/env bash
# Start `wrangler dev` (Cloudflare's local Workers and Workflows engine: miniflare + workerd)
# for a Worker folder, wait until it answers, print its pid. The benchmarks measure celld
# against it (bench/run.py --wrangler), and examples can be compared on it.
#
#   bench/wrangler/start.sh [WORKER_DIR] [PORT] [PERSIST_DIR] [-- extra wrangler dev args]
#
#   WORKER_DIR   folder with wrangler.jsonc / wrangler.toml (default: bench/wrangler/worker)
#   PORT         port on 127.0.0.1                            (default: 8787)
#   PERSIST_DIR  --persist-to folder                          (default: $WRANGLER_DEV_DIR/state-PORT)
#
# wrangler and Node 22 come from tests/wrangler/node_modules when `npm ci` was run there
# (as .ci/run does); otherwise they are installed with npm into $WRANGLER_DEV_DIR.
#
# Env knobs: WRANGLER_DEV_DIR (pid files, logs, the install if one is needed; default
#            ~/.cache/celld-bench/wrangler), LOG_LEVEL (wrangler --log-level, default info;
#            use warn for benchmarks), FRESH=1 (wipe PERSIST_DIR first), START_TIMEOUT (s,
#            default 90).
#
# stdout: the pid (last line). Log: $WRANGLER_DEV_DIR/wrangler-PORT.log, pid file:
# $WRANGLER_DEV_DIR/wrangler-PORT.pid. Stop with: stop.sh PORT (or kill -TERM <pid>;
# SIGTERM to that pid also ends its workerd and esbuild children).
#
# Only the npm registry is used (to install, if needed); telemetry, error reports and the
# request.cf download are turned off; HOME points into $WRANGLER_DEV_DIR so nothing is
# written to the real home.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# ORACLE_DIR: the name older callers pass for the same folder
RUN_DIR="${WRANGLER_DEV_DIR:-${ORACLE_DIR:-$HOME/.cache/celld-bench/wrangler}}"
WRANGLER_VERSION="4.164.0"   # needs Node >= 22.12 (as tests/wrangler/package.json pins)
NODE_VERSION="22.23.3"       # from the npm package `node` (ships the binary)

WORKER_DIR="${1:-$HERE/worker}"
PORT="${2:-8787}"
PERSIST_DIR="${3:-$RUN_DIR/state-$PORT}"
shift $(( $# < 3 ? $# : 3 )) || true
[ "${1:-}" = "--" ] && shift
EXTRA_ARGS=("$@")

WORKER_DIR="$(cd "$WORKER_DIR" && pwd)"
case "$(uname -m)" in aarch64|arm64) ARCH=arm64 ;; *) ARCH=x64 ;; esac

installed_in() {  # does $1/node_modules hold wrangler, a working node and workerd?
  local modules="$1/node_modules"
  [ -f "$modules/wrangler/bin/wrangler.js" ] || return 1
  [ -x "$modules/@cloudflare/workerd-linux-64/bin/workerd" ] \
    || [ -x "$modules/@cloudflare/workerd-linux-arm64/bin/workerd" ] || return 1
  for n in "$modules/node/bin/node" "$modules/node-linux-$ARCH/bin/node"; do
    if [ -x "$n" ] && "$n" -v >/dev/null 2>&1; then NODE_BIN="$n"; return 0; fi
  done
  return 1
}

if installed_in "$REPO/tests/wrangler"; then
  INSTALL="$REPO/tests/wrangler"
elif installed_in "$RUN_DIR"; then
  INSTALL="$RUN_DIR"
else
  echo "installing wrangler@$WRANGLER_VERSION + node@$NODE_VERSION into $RUN_DIR (npm registry)" >&2
  mkdir -p "$RUN_DIR"
  ( cd "$RUN_DIR"
    [ -f package.json ] || npm init -y >/dev/null
    npm install --no-audit --no-fund "node@$NODE_VERSION" "wrangler@$WRANGLER_VERSION" >&2 )
  if ! installed_in "$RUN_DIR"; then
    # an npm that skips install scripts leaves the `node` package without its binary
    ( cd "$RUN_DIR" && npm install --no-audit --no-fund "node-linux-$ARCH@$NODE_VERSION" >&2 )
    installed_in "$RUN_DIR" || { echo "no working node binary under $RUN_DIR/node_modules" >&2; exit 1; }
  fi
  INSTALL="$RUN_DIR"
fi
WRANGLER="$INSTALL/node_modules/wrangler/bin/wrangler.js"

mkdir -p "$RUN_DIR"
PIDFILE="$RUN_DIR/wrangler-$PORT.pid"
LOG="$RUN_DIR/wrangler-$PORT.log"
if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  echo "already running on port $PORT with pid $(cat "$PIDFILE") (stop.sh $PORT first)" >&2
  exit 1
fi
if curl -s -o /dev/null -m 2 "http://127.0.0.1:$PORT/" ; then
  echo "port $PORT already answers; refusing to start" >&2
  exit 1
fi
[ "${FRESH:-0}" = "1" ] && rm -rf "$PERSIST_DIR"
mkdir -p "$RUN_DIR/home/.config" "$RUN_DIR/logs" "$PERSIST_DIR"

export HOME="$RUN_DIR/home" XDG_CONFIG_HOME="$RUN_DIR/home/.config"
export WRANGLER_LOG_PATH="$RUN_DIR/logs"
export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false DO_NOT_TRACK=1
export CLOUDFLARE_CF_FETCH_ENABLED=false   # don't fetch request.cf data from the internet
export CI=true FORCE_COLOR=0
export PATH="$(dirname "$NODE_BIN"):$PATH"

cd "$WORKER_DIR"
setsid "$NODE_BIN" "$WRANGLER" dev --local --ip 127.0.0.1 --port "$PORT" \
  --persist-to "$PERSIST_DIR" --show-interactive-dev-session=false \
  --log-level "${LOG_LEVEL:-info}" ${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"} \
  >"$LOG" 2>&1 </dev/null &
PID=$!
echo "$PID" >"$PIDFILE"

deadline=$(( $(date +%s) + ${START_TIMEOUT:-90} ))
while :; do
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "wrangler dev exited; log follows:" >&2; cat "$LOG" >&2; rm -f "$PIDFILE"; exit 1
  fi
  code=$(curl -s -o /dev/null -w '%{http_code}' -m 2 "http://127.0.0.1:$PORT/" || true)
  # the proxy answers only once the user worker is up (any HTTP code counts: a worker
  # without a route for / may answer 404)
  if [ -n "$code" ] && [ "$code" != "000" ] && [ "$code" != "503" ]; then break; fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "timed out waiting for port $PORT; stopping pid $PID; log follows:" >&2
    kill -TERM "$PID" 2>/dev/null || true; cat "$LOG" >&2; rm -f "$PIDFILE"; exit 1
  fi
  sleep 0.3
done
echo "ready: http://127.0.0.1:$PORT  (worker $WORKER_DIR, state $PERSIST_DIR, log $LOG)" >&2
echo "$PID"
