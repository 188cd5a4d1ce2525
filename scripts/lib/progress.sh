# shellcheck shell=bash
# A line a minute on stderr while a long first build runs, so it does not look hung. Sourced
# by scripts/test-tools, kube-tools and conformance-tools.
#
#   progress_start "kube-tools: still building Kubernetes" [FUNCTION]
#       every minute: `<text> (N min)`, or `<text> (N min, <FUNCTION's output>)`
#   progress_stop
#
# PORTICO_PROGRESS_SECONDS changes the interval (tests). The ticker waits with the `read`
# builtin on a pipe no one writes to, not with `sleep`: it has no child that a stop could
# leave behind (an orphaned `sleep 60` kept the caller's output open, and a build lock with
# it). It also closes fd 9, the callers' build lock. Callers stop it in their EXIT trap too.
progress_pid=""
progress_fd=""

progress_start() {
  local text="$1" extra="${2:-}" interval="${PORTICO_PROGRESS_SECONDS:-60}" fifo
  progress_stop
  fifo="$(mktemp -u)"
  mkfifo "$fifo"
  exec {progress_fd}<>"$fifo"
  rm -f "$fifo"
  ( exec 9>&-
    n=0
    while :; do
      read -r -t "$interval" -u "$progress_fd" _ || true
      n=$((n + 1))
      elapsed=$((n * interval))
      if [ $((elapsed % 60)) = 0 ]; then when="$((elapsed / 60)) min"; else when="${elapsed}s"; fi
      if [ -n "$extra" ]; then echo "$text ($when, $("$extra"))" >&2; else echo "$text ($when)" >&2; fi
    done ) &
  progress_pid=$!
}

progress_stop() {
  if [ -n "$progress_pid" ]; then
    kill "$progress_pid" 2>/dev/null || true
    wait "$progress_pid" 2>/dev/null || true
    progress_pid=""
  fi
  if [ -n "$progress_fd" ]; then
    exec {progress_fd}>&-
    progress_fd=""
  fi
}
