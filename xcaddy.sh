#!/usr/bin/env bash
# Builds Caddy with lbpack's selection policies plugged in from this
# checkout, using a pinned xcaddy and a pinned Caddy.
#
#   ./xcaddy.sh build                              builds ./caddy
#   ./xcaddy.sh run --config Caddyfile.example     runs ./caddy run ..., building it first
#   ./xcaddy.sh <caddy subcommand> [args...]       runs ./caddy with them, building it first
#
# Commands other than build rebuild ./caddy only when it is missing or older
# than the Go sources it is built from. Needs Go and the Go module proxy (or a
# warm module cache); a build takes minutes.
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

# stale reports whether ./caddy is missing or older than a source it uses.
stale() {
  [ ! -x ./caddy ] ||
    [ -n "$(find go.mod go.sum core caddyplugin internal -newer ./caddy \( -name '*.go' -o -name 'go.*' \) ! -name '*_test.go' -print -quit 2>/dev/null)" ]
}

cmd=$1
shift
case "$cmd" in
  build) build ;;
  *)
    if stale; then
      build
    fi
    exec ./caddy "$cmd" "$@"
    ;;
esac
