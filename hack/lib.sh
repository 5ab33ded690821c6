# Shared by the hack/ scripts: timestamped messages on stderr, tagged with the calling script's LOG_PREFIX.
# shellcheck shell=bash

log() { printf '[%s %s] %s\n' "${LOG_PREFIX:-hack}" "$(date +%H:%M:%S)" "$*" >&2; }

die() {
  log "ERROR: $*"
  exit 1
}
