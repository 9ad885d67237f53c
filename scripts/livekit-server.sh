#!/usr/bin/env bash
# The LiveKit server at the version pinned in package.json (config.livekitServerVersion), built once
# with `go install` into a cache outside the clone, keyed by that version.
#
#   bash scripts/livekit-server.sh           builds it if needed, then runs it for local development:
#                                            dev mode (keys devkey / secret) on ws://127.0.0.1:7880, its
#                                            webhooks sent to the API on this machine (PORT, default 8080),
#                                            logging at LIVEKIT_LOG_LEVEL (default info: dev mode alone logs
#                                            at debug, a line for every step of every call)
#   bash scripts/livekit-server.sh --build   builds it if needed and prints its version
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(node -p "require('./package.json').config.livekitServerVersion")
bin_dir="${XDG_CACHE_HOME:-$HOME/.cache}/avatar-platform/livekit-server/$version"
if [ ! -x "$bin_dir/server" ]; then
  command -v go >/dev/null 2>&1 || { echo "Go is required to build the LiveKit server ($version)" >&2; exit 1; }
  echo "building livekit-server $version into $bin_dir (one time, a few minutes)"
  mkdir -p "$bin_dir"
  # Newer releases carry replace directives in go.mod, which `go install pkg@version` refuses;
  # the pinned version is the newest one it accepts.
  GOBIN="$bin_dir" GOFLAGS=-mod=mod go install "github.com/livekit/livekit-server/cmd/server@$version"
fi
if [ "${1:-}" = "--build" ]; then
  exec "$bin_dir/server" --version
fi

webhook="${LIVEKIT_WEBHOOK_URL:-http://127.0.0.1:${PORT:-8080}/webhooks/livekit}"
level="${LIVEKIT_LOG_LEVEL:-info}"
echo "LiveKit $version on ws://127.0.0.1:7880 (devkey / secret), webhooks to $webhook, logging at $level"
exec "$bin_dir/server" --dev --bind 127.0.0.1 --node-ip 127.0.0.1 \
  --config-body "{logging: {level: $level}, webhook: {api_key: devkey, urls: ['$webhook']}}"
