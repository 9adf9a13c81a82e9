#!/usr/bin/env bash
# Builds Caddy with lbpack's selection policies plugged in from this
# checkout, using a pinned xcaddy and a pinned Caddy.
#
#   ./xcaddy.sh build                              leaves ./caddy
#   ./xcaddy.sh run --config Caddyfile.example     builds, then runs ./caddy run ...
#   ./xcaddy.sh <caddy subcommand> [args...]       builds, then runs ./caddy with them
#
# Needs Go and the Go module proxy (or a warm module cache). Set
# LBPACK_SKIP_BUILD=1 to reuse an existing ./caddy.
set -euo pipefail

XCADDY_VERSION=v0.4.5
CADDY_VERSION=v2.11.9
MODULE=github.com/lbpack/lbpack

cd "$(dirname "$0")"

build() {
  # xcaddy imports the plugin package and replaces the whole module with
  # this directory, so uncommitted changes are built too. The module is
  # never fetched: GOVCS=off makes Go's lookup of it fail as "not found"
  # (instead of asking the proxy, which may refuse an unknown module with
  # an error) and fall back to the replacement.
  GOPRIVATE="${GOPRIVATE:+$GOPRIVATE,}${MODULE}" \
  GOVCS="${GOVCS:+$GOVCS,}${MODULE}:off" \
  go run "github.com/caddyserver/xcaddy/cmd/xcaddy@${XCADDY_VERSION}" build "${CADDY_VERSION}" \
    --output ./caddy \
    --with "${MODULE}/caddyplugin" \
    --replace "${MODULE}=$(pwd)"
}

if [ $# -eq 0 ]; then
  echo "usage: $0 build | run [caddy run flags...] | <caddy subcommand> [args...]" >&2
  exit 2
fi

cmd=$1
shift
if [ "${LBPACK_SKIP_BUILD:-0}" != 1 ] || [ ! -x ./caddy ]; then
  build
fi
case "$cmd" in
  build) ;;
  *) exec ./caddy "$cmd" "$@" ;;
esac
