#!/usr/bin/env bash
# Runs every test of lbpack: the main module under the race detector (core,
# plugins, lbsim, the nginx conformance suite), then the nested modules: the
# yaegi suite (core and the Traefik plugin interpreted as Traefik does) and
# the comparison benchmarks' own tests. Fuzz tests run their seed corpus.
set -euo pipefail
cd "$(dirname "$0")"

echo "== go vet"
go vet ./...
(cd yaegitest && go vet ./...)
(cd bench && go vet ./...)

echo "== main module (-race)"
go test -race -count=1 ./...

echo "== yaegi suite (core and traefikplugin under Traefik's interpreter)"
(cd yaegitest && go test -count=1 ./...)

echo "== bench module"
(cd bench && go test -count=1 ./...)
