#!/usr/bin/env bash
# Builds Caddy with lbpack's selection policies plugged in from this
# checkout, using a pinned xcaddy and a pinned Caddy.
#
#   ./xcaddy.sh build [--with MODULE[@VERSION][=REPLACEMENT]]...
#                                                  builds ./caddy, with other plugins too
#   ./xcaddy.sh run --config Caddyfile.example     runs ./caddy run ..., building it first
#   ./xcaddy.sh <caddy subcommand> [args...]       runs ./caddy with them, building it first
#
# --with takes what xcaddy's --with takes: a module path, optionally @version
# and =replacement (a local directory), e.g.
#   ./xcaddy.sh build --with github.com/caddy-dns/cloudflare@v0.2.1
# The plugins of the last build are kept in .xcaddy-with, so that the
# automatic rebuilds below keep them.
#
# XCADDY_SH_DRY_RUN=1 prints the xcaddy command instead of running it.
#
# Commands other than build rebuild ./caddy only when it is missing or older
# than the Go sources it is built from. Needs Go and the Go module proxy (or a
# warm module cache). The first build downloads and compiles Caddy: several
# minutes; later ones reuse Go's build cache.
set -euo pipefail

XCADDY_VERSION=v0.4.5
CADDY_VERSION=v2.11.9
MODULE=github.com/lbpack/lbpack

cd "$(dirname "$0")"

usage() {
  echo "usage: $0 build [--with MODULE[@VERSION][=REPLACEMENT]]... | run [caddy run flags...] | <caddy subcommand> [args...]" >&2
  exit 2
}

# build builds ./caddy with lbpack and the plugins given as arguments.
build() {
  local with=() plugins=""
  for m in "$@"; do
    with+=(--with "$m")
    plugins="${plugins:+$plugins, }$m"
  done
  echo "xcaddy.sh: building ./caddy: Caddy ${CADDY_VERSION} with lbpack from this checkout${plugins:+, plus $plugins}, by xcaddy ${XCADDY_VERSION}." >&2
  echo "xcaddy.sh: the first build downloads and compiles Caddy and takes several minutes; later ones take less." >&2
  local start=$SECONDS
  # xcaddy imports the plugin package and replaces the whole module with
  # this directory, so uncommitted changes are built too. The module is
  # never fetched: GOVCS=off makes Go's lookup of it fail as "not found"
  # (instead of asking the proxy, which may refuse an unknown module with
  # an error) and fall back to the replacement.
  GOPRIVATE="${GOPRIVATE:+$GOPRIVATE,}${MODULE}" \
  GOVCS="${GOVCS:+$GOVCS,}${MODULE}:off" \
  ${XCADDY_SH_DRY_RUN:+echo} go run "github.com/caddyserver/xcaddy/cmd/xcaddy@${XCADDY_VERSION}" build "${CADDY_VERSION}" \
    --output ./caddy \
    --with "${MODULE}/caddyplugin" \
    --replace "${MODULE}=$(pwd)" \
    ${with[@]+"${with[@]}"}
  if [ -n "${XCADDY_SH_DRY_RUN:-}" ]; then
    return
  fi
  printf '%s\n' ${@+"$@"} >.xcaddy-with
  echo "xcaddy.sh: built ./caddy in $((SECONDS - start))s." >&2
}

# stale reports whether ./caddy is missing or older than a source it uses.
stale() {
  [ ! -x ./caddy ] ||
    [ -n "$(find go.mod go.sum core caddyplugin internal -newer ./caddy \( -name '*.go' -o -name 'go.*' \) ! -name '*_test.go' -print -quit 2>/dev/null)" ]
}

# saved prints the plugins of the last build, one per line.
saved() {
  if [ -f .xcaddy-with ]; then
    grep -v '^$' .xcaddy-with || true
  fi
}

if [ $# -eq 0 ]; then
  usage
fi

cmd=$1
shift
case "$cmd" in
  build)
    plugins=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --with)
          if [ $# -lt 2 ] || [ -z "$2" ] || [ "${2#-}" != "$2" ]; then
            echo "xcaddy.sh: --with needs a module: --with MODULE[@VERSION][=REPLACEMENT]" >&2
            exit 2
          fi
          plugins+=("$2")
          shift 2
          ;;
        --with=?*)
          plugins+=("${1#--with=}")
          shift
          ;;
        *)
          echo "xcaddy.sh build: unknown argument \"$1\"" >&2
          usage
          ;;
      esac
    done
    build ${plugins[@]+"${plugins[@]}"}
    ;;
  *)
    if stale; then
      mapfile -t plugins < <(saved)
      build ${plugins[@]+"${plugins[@]}"}
    fi
    exec ./caddy "$cmd" "$@"
    ;;
esac
