#!/usr/bin/env bash
# Installs what the test suite needs on a Debian machine, idempotently:
#   - redis-server, ffmpeg and chromium (the dashboard's browser tests drive it headless with
#     playwright-core: no browser download) from Debian's packages,
#   - the LiveKit server, built with `go install` at the version pinned in package.json
#     (config.livekitServerVersion) into a cache outside the clone, keyed by that version,
#   - moto's S3-compatible server (PyPI) in a venv in the same cache, for the storage contract suite,
#   - the npm dependencies (npm ci).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v ffmpeg >/dev/null 2>&1 || missing+=(ffmpeg)
[ -x /usr/bin/chromium ] || [ -n "${CHROMIUM_PATH:-}" ] || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing from apt: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

bash scripts/livekit-server.sh --build

# A real S3-compatible server for the storage contract suite: moto, in a venv keyed by version.
moto_version=$(node -p "require('./package.json').config.motoVersion")
moto_dir="${XDG_CACHE_HOME:-$HOME/.cache}/avatar-platform/moto-$moto_version"
if [ ! -x "$moto_dir/bin/moto_server" ]; then
  echo "installing moto[server] $moto_version into $moto_dir"
  python3 -m venv "$moto_dir"
  "$moto_dir/bin/pip" install --quiet "moto[server]==$moto_version"
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  # The project's .npmrc skips onnxruntime-node's CUDA download; ONNXRUNTIME_NODE_INSTALL=cuda12 opts in.
  npm ci --no-audit --no-fund
fi
