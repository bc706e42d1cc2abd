#!/usr/bin/env bash
# Stop the wrangler dev that start.sh started on PORT (default 8787), by its pid.
# SIGTERM to the wrangler pid makes it stop its own workerd and esbuild children;
# after 10 s any process still left in its process group (start.sh runs it under
# setsid, so the group id is that pid) gets SIGKILL.
set -uo pipefail
RUN_DIR="${WRANGLER_DEV_DIR:-${ORACLE_DIR:-$HOME/.cache/celld-bench/wrangler}}"
PORT="${1:-8787}"
PIDFILE="$RUN_DIR/wrangler-$PORT.pid"
[ -f "$PIDFILE" ] || { echo "no pid file $PIDFILE" >&2; exit 1; }
PID="$(cat "$PIDFILE")"
kill -TERM "$PID" 2>/dev/null || true
for _ in $(seq 1 50); do
  pgrep -g "$PID" >/dev/null 2>&1 || break
  sleep 0.2
done
if pgrep -g "$PID" >/dev/null 2>&1; then
  kill -KILL -- "-$PID" 2>/dev/null || true
fi
rm -f "$PIDFILE"
echo "stopped $PID" >&2
