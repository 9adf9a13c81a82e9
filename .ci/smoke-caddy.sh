#!/usr/bin/env bash
# End-to-end smoke test: build Caddy with lbpack through xcaddy.sh, run the
# demo Caddyfile.example, and check that ten requests to / follow nginx's
# smooth weighted round robin for weights 5, 3, 2. Every wait is bounded, and
# the Caddy started here is always stopped. LBPACK_SKIP_BUILD=1 reuses an
# existing ./caddy (when iterating on this script).
set -euo pipefail
cd "$(dirname "$0")/.."

want="a b c a a b a c b a"

if [ "${LBPACK_SKIP_BUILD:-0}" != 1 ] || [ ! -x ./caddy ]; then
  echo "building Caddy with lbpack (xcaddy)..."
  timeout 1200 ./xcaddy.sh build
fi

for port in 2020 8080 9001 9002 9003; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "FAIL: port $port is already in use; the demo needs it" >&2
    exit 1
  fi
done

log=$(mktemp)
./caddy run --config Caddyfile.example --adapter caddyfile >"$log" 2>&1 &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$log"
}
trap cleanup EXIT

# Wait (at most 15 s) for the proxy to answer.
ready=0
for _ in $(seq 150); do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "FAIL: caddy exited early:" >&2
    cat "$log" >&2
    exit 1
  fi
  if curl -fsS --max-time 1 http://127.0.0.1:9001/ >/dev/null 2>&1 &&
     curl -fsS --max-time 1 http://127.0.0.1:2020/config/ >/dev/null 2>&1; then
    ready=1
    break
  fi
  sleep 0.1
done
if [ "$ready" != 1 ]; then
  echo "FAIL: caddy did not come up within 15 s:" >&2
  cat "$log" >&2
  exit 1
fi

got=""
for _ in $(seq 10); do
  got="$got $(curl -fsS --max-time 5 http://localhost:8080/)"
done
got=${got# }
echo "ten requests to /: $got"
if [ "$got" != "$want" ]; then
  echo "FAIL: want $want" >&2
  exit 1
fi

# The admin endpoint reports the picks.
state=$(curl -fsS --max-time 5 http://127.0.0.1:2020/lbpack/state)
if ! grep -q '"policy":"smooth_wrr"' <<<"$state"; then
  echo "FAIL: /lbpack/state lacks the smooth_wrr policy: $state" >&2
  exit 1
fi

# The Caddy subcommand prints the same trace as lbsim.
trace=$(./caddy lbpack trace --strategy smooth_wrr --backends a=5,b=3,c=2 -n 10 | tail -n 1)
if [ "$trace" != "sequence: $want" ]; then
  echo "FAIL: caddy lbpack trace ended with: $trace" >&2
  exit 1
fi

# The Caddy subcommand converts an nginx upstream, and the real binary loads
# what it printed (caddy validate provisions every module).
conf=$(mktemp -d)
cat >"$conf/nginx.conf" <<'NGINX'
events {}
http {
    upstream app {
        server 127.0.0.1:9001 weight=5;
        server 127.0.0.1:9002 weight=3 max_fails=2 fail_timeout=5s;
        server 127.0.0.1:9003 weight=2;
    }
    server {
        listen 127.0.0.1:8089;
        location / { proxy_pass http://app; }
    }
}
NGINX
./caddy lbpack convert "$conf/nginx.conf" >"$conf/Caddyfile" 2>"$conf/warnings"
if ! grep -q 'lb_policy smooth_wrr' "$conf/Caddyfile"; then
  echo "FAIL: caddy lbpack convert printed no smooth_wrr policy:" >&2
  cat "$conf/Caddyfile" "$conf/warnings" >&2
  rm -rf "$conf"
  exit 1
fi
if ! ./caddy validate --config "$conf/Caddyfile" --adapter caddyfile >"$conf/validate" 2>&1; then
  echo "FAIL: the converted Caddyfile does not load:" >&2
  cat "$conf/Caddyfile" "$conf/validate" >&2
  rm -rf "$conf"
  exit 1
fi
rm -rf "$conf"
echo "caddy lbpack convert: the converted Caddyfile validates"

echo "ok: Caddy with lbpack balances / as nginx does"
