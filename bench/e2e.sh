#!/usr/bin/env bash
# End-to-end comparison on loopback: local backends, then Caddy (with lbpack's
# policies and with its built-ins), nginx and HAProxy in front of them. Two
# parts, each writing its own section of docs/e2e.md (the rest of the file
# is kept):
#   throughput: each row measured with wrk for a bounded time at 3 and 100
#     backends;
#   scenarios: five backends, one 10x slower (then one answering 500 at
#     once), the latency-aware and least-loaded policies at a fixed request
#     rate below capacity (bench/cmd/rate): p50, p99, errors and shares.
# Every process it starts, it stops.
#
#   bench/e2e.sh                              # both parts (about 10 minutes)
#   DURATION=1s ROUNDS=1 bench/e2e.sh           # a quick check
#   PARTS=scenarios BASE=33800 HOST=127.0.0.2 bench/e2e.sh   # one part, other ports
#   NGINX_LEAST_TIME=/path/to/nginx bench/e2e.sh  # scenarios add that nginx's least_time rows
#
# Every row (proxy and policy) runs once per round, rounds one after the
# other, and the table shows each row's median round: load from elsewhere on
# the machine then hits every row alike instead of a few.
#
# Needs: go, wrk, nginx, haproxy (Debian: apt-get install -y wrk nginx haproxy).
# NGINX_LEAST_TIME, if set, names an nginx binary of 1.31.0 or later (whose
# open-source build has least_time; Debian's has not): the scenarios then
# add its "least_time header" and "least_time header inflight" rows.
# Caddy is built by the repository's xcaddy.sh when it exists, otherwise from
# bench/cmd/caddy (the same modules, pinned by bench/go.mod).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
DURATION="${DURATION:-3s}"
ROUNDS="${ROUNDS:-3}"
CONNS="${CONNS:-32}"
PARTS="${PARTS:-throughput scenarios}"
RATE="${RATE:-600}"                   # scenarios: requests per second
SCENARIO_DURATION="${SCENARIO_DURATION:-5s}"
out="$root/docs/e2e.md"
for part in $PARTS; do
	case "$part" in throughput | scenarios) ;; *) echo "e2e: PARTS: unknown part $part (want throughput, scenarios)" >&2; exit 1 ;; esac
done
has_part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

for tool in go wrk nginx haproxy; do
	command -v "$tool" >/dev/null || { echo "e2e: $tool not found" >&2; exit 1; }
done
NGINX_LEAST_TIME="${NGINX_LEAST_TIME:-}"
lt_version=""
if [ -n "$NGINX_LEAST_TIME" ]; then
	[ -x "$NGINX_LEAST_TIME" ] || { echo "e2e: NGINX_LEAST_TIME $NGINX_LEAST_TIME: not an executable" >&2; exit 1; }
	lt_version="$("$NGINX_LEAST_TIME" -v 2>&1 | sed 's/.*: //')"
fi

work="$(mktemp -d)"
pids=()
cleanup() {
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

# stop PID: stop one process this script started, and forget it.
stop() {
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	local keep=()
	for p in "${pids[@]}"; do [ "$p" != "$1" ] && keep+=("$p"); done
	pids=("${keep[@]}")
}

# wait_port PORT: wait up to 20 s for a listener on HOST:PORT.
wait_port() {
	for _ in $(seq 1 200); do
		if (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "e2e: nothing listens on $HOST:$1" >&2
	return 1
}

echo "== building backends and Caddy"
(cd "$here" && go build -o "$work/backend" ./cmd/backend && go build -o "$work/rate" ./cmd/rate)
caddy_from="bench/cmd/caddy (no xcaddy.sh in the repository)"
if [ -x "$root/xcaddy.sh" ] && (cd "$root" && ./xcaddy.sh build >"$work/xcaddy.log" 2>&1) && [ -x "$root/caddy" ]; then
	cp "$root/caddy" "$work/caddy"
	caddy_from="xcaddy.sh"
else
	[ -x "$root/xcaddy.sh" ] && { echo "e2e: xcaddy.sh build failed, using bench/cmd/caddy:" >&2; tail -5 "$work/xcaddy.log" >&2; caddy_from="bench/cmd/caddy (xcaddy.sh build failed)"; }
	(cd "$here" && go build -o "$work/caddy" ./cmd/caddy)
fi
caddy_version="$("$work/caddy" version | awk '{print $1}')"

cat >"$work/keys.lua" <<'EOF'
-- Every request asks for a different URI, so hash policies spread the load.
local n = 0
request = function()
	n = n + 1
	return wrk.format("GET", "/k/" .. ((n * 7919) % 100003))
end
EOF

# weight I N: backend I's weight (1-based): 5,3,2 for three backends, else 1..5 repeating.
weight() {
	if [ "$2" -eq 3 ]; then
		case "$1" in 1) echo 5 ;; 2) echo 3 ;; 3) echo 2 ;; esac
	else
		echo $(( ($1 - 1) % 5 + 1 ))
	fi
}

# Ports from BASE: BASE is the backends' counts endpoint, BASE+1 and up the
# backends (100 in the throughput part, 5 in the scenarios), then 10 ports
# for nginx, 10 for HAProxy and 10 for Caddy (see proxy_ports): 132 ports
# for the throughput part, 36 for the scenarios alone.
BASE="${BASE:-27000}"
# HOST is the loopback address every process listens on: another than
# 127.0.0.1 (127.0.0.2) keeps clear of other programs' outgoing connections,
# whose local ports may be the ones chosen here.
HOST="${HOST:-127.0.0.1}"
BACKEND_PORT=$((BASE + 1))
CONTROL="$HOST:$BASE"
# proxy_ports N: the proxies' first ports, after N backends.
proxy_ports() {
	NGINX_PORT=$((BACKEND_PORT + $1))
	HAPROXY_PORT=$((NGINX_PORT + 10))
	CADDY_PORT=$((HAPROXY_PORT + 10))
}
# free_ports PORT...: fail unless every port is free.
free_ports() {
	for p in "$@"; do
		if (exec 3<>"/dev/tcp/$HOST/$p") 2>/dev/null; then
			echo "e2e: port $p is in use; set BASE to move every port" >&2
			exit 1
		fi
	done
}
results="$work/results.tsv" # n, proxy, policy, req/s, p50, p99, shares
: >"$results"

# run_once N ROW PORT: one wrk run against PORT; appends "req/s p50 p99" to
# ROW's runs file and adds the backends' counts to ROW's counts file.
run_once() {
	local n="$1" row="$2" port="$3"
	curl -fsS "http://$CONTROL/counts" >/dev/null
	curl -fsS -o /dev/null "http://$HOST:$port/warmup" || { echo "e2e: row $row (port $port) does not answer" >&2; return 1; }
	wrk -t1 -c"$CONNS" -d"$DURATION" --latency -s "$work/keys.lua" "http://$HOST:$port" >"$work/wrk.out" 2>&1 || true
	awk '/^Requests\/sec:/ {r = $2} $1 == "50%" {p50 = $2} $1 == "99%" {p99 = $2} /Non-2xx/ {bad = $NF}
		END {printf "%.0f %s %s %s\n", r, (p50 ? p50 : "-"), (p99 ? p99 : "-"), (bad ? bad : 0)}' "$work/wrk.out" >>"$work/row$row.runs"
	curl -fsS "http://$CONTROL/counts" >>"$work/row$row.counts"
}

# summarize N ROW PROXY POLICY: the median run's figures and the shares over all runs.
summarize() {
	local n="$1" row="$2" proxy="$3" policy="$4" med shares bad
	med="$(sort -n "$work/row$row.runs" | awk '{l[NR] = $0} END {print l[int((NR + 1) / 2)]}')"
	bad="$(awk '{b += $4} END {print b + 0}' "$work/row$row.runs")"
	shares="$(awk -v n="$n" '
		{ c[$1] += $2; t += $2; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
		END {
			if (t == 0) { print "-"; exit }
			if (n <= 3) { for (i = 1; i <= n; i++) printf "%s%.1f", (i > 1 ? " / " : ""), 100 * c[order[i]] / t; exit }
			max = 0; used = 0
			for (i = 1; i <= n; i++) { x = c[order[i]]; if (x > max) max = x; if (x > 0) used++ }
			printf "%d of %d used, max %.2f%%", used, n, 100 * max / t
		}' "$work/row$row.counts")"
	[ "$bad" -gt 0 ] && shares="$shares; non-2xx: $bad"
	set -- $med
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$proxy" "$policy" "$1" "$2" "$3" "$shares" >>"$results"
	printf '  %-13s %-30s %8s req/s  p99 %-9s %s\n' "$proxy" "$policy" "$1" "$3" "$shares"
}

# start_caddy CONF ENTRY...: writes to CONF a Caddyfile with one site per
# entry, on CADDY_PORT and up, each proxying with the entry's policy
# ("policy", "policy|directive; directive..." or
# "policy|directives|upstream upstream...") to the entry's upstreams, or
# else to the caller's servers, and starts Caddy on it, adding it to the
# caller's proxy_pids.
start_caddy() {
	local conf="$1" port=$CADDY_PORT entry more ups
	shift
	{
		printf '{\n  admin off\n  auto_https off\n  persist_config off\n  log {\n    level ERROR\n  }\n}\n'
		for entry in "$@"; do
			more="" ups="${servers[*]}"
			[[ "$entry" == *"|"* ]] && more="${entry#*|}"
			[[ "$more" == *"|"* ]] && { ups="${more#*|}"; more="${more%%|*}"; }
			printf 'http://%s:%d {\n  bind %s\n  reverse_proxy %s {\n    lb_policy %s\n    %s\n  }\n}\n' \
				"$HOST" "$port" "$HOST" "$ups" "${entry%%|*}" "${more//; /$'\n'    }"
			port=$((port + 1))
		done
	} >"$conf"
	XDG_DATA_HOME="$work/xdg" XDG_CONFIG_HOME="$work/xdg" "$work/caddy" run --config "$conf" --adapter caddyfile >"$work/caddy.log" 2>&1 &
	pids+=($!)
	proxy_pids+=($!)
}

# run_rows MEASURE SUMMARIZE ARG: ROUNDS rounds over the caller's rows
# ("proxy|policy|port"), calling "MEASURE ARG ROW PORT" for each, then
# "SUMMARIZE ARG ROW PROXY POLICY" for each row.
run_rows() {
	local measure="$1" sum="$2" arg="$3" round r proxy policy port
	for round in $(seq 1 "$ROUNDS"); do
		echo "  round $round of $ROUNDS"
		for r in "${!rows[@]}"; do
			IFS='|' read -r _ _ port <<<"${rows[$r]}"
			"$measure" "$arg" "$r" "$port"
		done
	done
	for r in "${!rows[@]}"; do
		IFS='|' read -r proxy policy _ <<<"${rows[$r]}"
		"$sum" "$arg" "$r" "$proxy" "$policy"
	done
}

throughput_part() {
	proxy_ports 100
	free_ports $BASE $(seq "$BACKEND_PORT" $((BACKEND_PORT + 99))) $(seq "$NGINX_PORT" $((NGINX_PORT + 2))) \
		$(seq "$HAPROXY_PORT" $((HAPROXY_PORT + 2))) $(seq "$CADDY_PORT" $((CADDY_PORT + 9)))
	"$work/backend" -n 100 -host "$HOST" -port "$BACKEND_PORT" -control "$CONTROL" &
	backend_pid=$!
	pids+=($backend_pid)
	wait_port "$BASE"
	wait_port $((BACKEND_PORT + 99))

	for n in 3 100; do
		echo "== $n backends"
		servers=()
		weights=()
		for i in $(seq 1 "$n"); do
			servers+=("$HOST:$((BACKEND_PORT + i - 1))")
			weights+=("$(weight "$i" "$n")")
		done
		# rows: "proxy|policy|port", measured in rounds so that a burst of load
		# from elsewhere on the machine hits every row alike.
		rows=("direct|one backend, no proxy|$BACKEND_PORT")
		proxy_pids=()

		# nginx: smooth weighted round robin (its default), least_conn, hash consistent.
		conf="$work/nginx-$n.conf"
		{
			echo "daemon off; worker_processes auto; pid $work/nginx.pid; error_log $work/nginx-error.log;"
			echo "events { worker_connections 4096; }"
			echo "http { access_log off;"
			echo "  client_body_temp_path $work/nb; proxy_temp_path $work/np; fastcgi_temp_path $work/nf; uwsgi_temp_path $work/nu; scgi_temp_path $work/ns;"
			for pol in rr least_conn hash; do
				echo "  upstream $pol {"
				case "$pol" in least_conn) echo "    least_conn;" ;; hash) echo "    hash \$request_uri consistent;" ;; esac
				for i in $(seq 0 $((n - 1))); do echo "    server ${servers[$i]} weight=${weights[$i]};"; done
				echo "    keepalive 64;"
				echo "  }"
			done
			port=$NGINX_PORT
			for pol in rr least_conn hash; do
				echo "  server { listen $HOST:$port; location / { proxy_pass http://$pol; proxy_http_version 1.1; proxy_set_header Connection \"\"; } }"
				port=$((port + 1))
			done
			echo "}"
		} >"$conf"
		nginx -c "$conf" -e "$work/nginx-error.log" &
		pids+=($!)
		proxy_pids+=($!)
		rows+=("nginx|weighted (smooth)|$NGINX_PORT" "nginx|least_conn|$((NGINX_PORT + 1))" "nginx|hash \$request_uri consistent|$((NGINX_PORT + 2))")

		# HAProxy: roundrobin, leastconn, uri with consistent hashing.
		conf="$work/haproxy-$n.cfg"
		{
			printf 'global\n  maxconn 8192\n\ndefaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n  http-reuse always\n\n'
			port=$HAPROXY_PORT
			for pol in roundrobin leastconn uri; do
				printf 'frontend f_%s\n  bind %s:%d\n  default_backend b_%s\n\n' "$pol" "$HOST" "$port" "$pol"
				printf 'backend b_%s\n  balance %s\n' "$pol" "$pol"
				[ "$pol" = uri ] && printf '  hash-type consistent\n'
				for i in $(seq 0 $((n - 1))); do printf '  server s%d %s weight %d\n' "$i" "${servers[$i]}" "${weights[$i]}"; done
				printf '\n'
				port=$((port + 1))
			done
		} >"$conf"
		haproxy -db -f "$conf" >"$work/haproxy.log" 2>&1 &
		pids+=($!)
		proxy_pids+=($!)
		rows+=("HAProxy|roundrobin (weighted)|$HAPROXY_PORT" "HAProxy|leastconn|$((HAPROXY_PORT + 1))" "HAProxy|uri, hash-type consistent|$((HAPROXY_PORT + 2))")

		# Caddy: one site per policy, built-ins and lbpack's.
		conf="$work/Caddyfile-$n"
		policies=(
			"weighted_round_robin ${weights[*]}"
			"round_robin"
			"least_conn"
			"uri_hash"
			"smooth_wrr ${weights[*]}"
			"gcd_wrr ${weights[*]}"
			"weighted_least_conn ${weights[*]}"
			"fair ${weights[*]}"
			"url_hash ${weights[*]}"
			"url_hash ${weights[*]} {"$'\n      mode maglev\n    }'
		)
		start_caddy "$conf" "${policies[@]}"
		port=$CADDY_PORT
		for pol in "${policies[@]}"; do
			name="${pol%% *}"
			case "$pol" in *maglev*) name="url_hash maglev" ;; url_hash*) name="url_hash (ketama)" ;; esac
			case "$name" in
			weighted_round_robin | round_robin | least_conn | uri_hash) proxy="Caddy" ;;
			*) proxy="Caddy+lbpack" ;;
			esac
			rows+=("$proxy|$name|$port")
			port=$((port + 1))
		done

		wait_port $((NGINX_PORT + 2))
		wait_port $((HAPROXY_PORT + 2))
		wait_port $((CADDY_PORT + ${#policies[@]} - 1)) || { tail -20 "$work/caddy.log" >&2; exit 1; }
		rm -f "$work"/row*.runs "$work"/row*.counts
		run_rows run_once summarize "$n"
		for pid in "${proxy_pids[@]}"; do stop "$pid"; done
	done

	stop "$backend_pid"
	{
		echo "Generated by \`bench/e2e.sh\` on $(date -u +%Y-%m-%d): $(nproc) CPUs shared by wrk, the proxy and the backends,"
		echo "so absolute figures are low and drift between runs; compare rows of one run."
		echo "wrk -t1 -c$CONNS -d$DURATION per run, $ROUNDS rounds over all rows, the median round shown; every request a different URI (so hash policies spread);"
		echo "backends are one Go process answering 5 bytes per request on $HOST ports $BACKEND_PORT and up;"
		echo "weights 5,3,2 for three backends, 1..5 repeating for 100."
		echo "Proxies: Caddy $caddy_version built by $caddy_from; $(nginx -v 2>&1 | sed 's/.*: //') (worker_processes auto, upstream keepalive 64);"
		echo "$(haproxy -v | head -1 | awk '{print "HAProxy " $3}') (default threads, http-reuse always)."
		echo "Shares are each backend's fraction of the requests, a / b / c for three backends (ideal 50 / 30 / 20 for weighted policies);"
		echo "for 100 backends, how many got requests and the largest share (ideal for weights 1..5: 1.67%)."
		echo "Caddy's built-in round_robin, least_conn and uri_hash take no weights, so their ideal is an even split."
		echo
		echo "| backends | proxy | policy | requests/s | p50 | p99 | shares |"
		echo "|---:|---|---|---:|---:|---:|---|"
		awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7 }' "$results"
	} >"$work/throughput.md"
}

# rate_once SCENARIO ROW PORT: one fixed-rate run against PORT; appends
# "sent ok other failed skipped p50 p99 mean" to ROW's runs file and the
# backends' counts to ROW's counts file.
rate_once() {
	local row="$2" port="$3"
	curl -fsS "http://$CONTROL/counts" >/dev/null
	curl -sS -o /dev/null "http://$HOST:$port/warmup" || { echo "e2e: row $row (port $port) does not answer" >&2; return 1; }
	"$work/rate" -url "http://$HOST:$port" -rate "$RATE" -duration "$SCENARIO_DURATION" >>"$work/srow$row.runs"
	curl -fsS "http://$CONTROL/counts" >>"$work/srow$row.counts"
}

# scenario_line SCENARIO ROW PROXY POLICY: the round with the median p99,
# the lowest and highest p99 of the rounds, errors and shares over all
# rounds.
scenario_line() {
	local scen="$1" row="$2" proxy="$3" policy="$4" med span errs shares
	med="$(sort -g -k7 "$work/srow$row.runs" | awk '{l[NR] = $0} END {print l[int((NR + 1) / 2)]}')"
	span="$(sort -g -k7 "$work/srow$row.runs" | awk 'NR == 1 {lo = $7} {hi = $7} END {print lo " - " hi}')"
	errs="$(awk '{s += $1; bad += $3 + $4 + $5} END {printf "%.1f%%", (s ? 100 * bad / s : 0)}' "$work/srow$row.runs")"
	shares="$(awk '{ c[$1] += $2; t += $2; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
		END { if (t == 0) { print "-"; exit } for (i = 1; i <= k; i++) printf "%s%.2f", (i > 1 ? " / " : ""), 100 * c[order[i]] / t }' "$work/srow$row.counts")"
	set -- $med
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$scen" "$proxy" "$policy" "$6" "$7" "$span" "$errs" "$shares" >>"$work/scenarios.tsv"
	printf '  %-13s %-22s p50 %6s ms  p99 %7s ms (%s)  errors %-6s %s\n' "$proxy" "$policy" "$6" "$7" "$span" "$errs" "$shares"
}

# scenario_nginx NAME PORT ENTRY...: writes $work/NAME.conf, an nginx
# configuration with one upstream per entry ("directive|server server...",
# the directive empty for round robin), each with upstream keepalive 64 and
# no zone (each worker process keeps its own counts and times), served on
# PORT and up.
scenario_nginx() {
	local name="$1" port="$2" entry d s
	shift 2
	{
		echo "daemon off; worker_processes auto; pid $work/$name.pid; error_log $work/$name-error.log;"
		echo "events { worker_connections 4096; }"
		echo "http { access_log off;"
		echo "  client_body_temp_path $work/$name-b; proxy_temp_path $work/$name-p; fastcgi_temp_path $work/$name-f; uwsgi_temp_path $work/$name-u; scgi_temp_path $work/$name-s;"
		for entry in "$@"; do
			d="${entry%%|*}"
			echo "  upstream u$port {${d:+ $d;}"
			for s in ${entry#*|}; do echo "    server $s;"; done
			echo "    keepalive 64; }"
			echo "  server { listen $HOST:$port; location / { proxy_pass http://u$port; proxy_http_version 1.1; proxy_set_header Connection \"\"; } }"
			port=$((port + 1))
		done
		echo "}"
	} >"$work/$name.conf"
}

scenarios_part() {
	local load_before
	load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
	proxy_ports 5
	free_ports $BASE $(seq "$BACKEND_PORT" $((BACKEND_PORT + 4))) $(seq "$NGINX_PORT" $((NGINX_PORT + 4))) "$HAPROXY_PORT" $(seq "$CADDY_PORT" $((CADDY_PORT + 5)))
	: >"$work/scenarios.tsv"
	local servers=() i scen bflags fast
	for i in 0 1 2 3 4; do servers+=("$HOST:$((BACKEND_PORT + i))"); done
	# The proxy's own cost, told apart from its policy's: each proxy also
	# runs round robin over the four good backends alone, as a policy that
	# knew which backend is bad from the start would.
	fast="${servers[*]:0:4}"
	local own="round robin over a-d (the proxy's own cost)"
	for scen in slow failing; do
		case "$scen" in
		slow) bflags=(-delay 5ms -slow 5 -slow-delay 50ms -workers 4) ;;
		failing) bflags=(-delay 5ms -fail 5 -workers 4) ;;
		esac
		echo "== scenario $scen: backend e ${bflags[*]:2}"
		"$work/backend" -n 5 -host "$HOST" -port "$BACKEND_PORT" -control "$CONTROL" "${bflags[@]}" &
		local backend_pid=$!
		pids+=($backend_pid)
		wait_port "$BASE"
		wait_port $((BACKEND_PORT + 4))
		local proxy_pids=() rows=()

		scenario_nginx nginx-scenario "$NGINX_PORT" "least_conn|${servers[*]}" "|$fast"
		nginx -c "$work/nginx-scenario.conf" -e "$work/nginx-scenario-error.log" &
		proxy_pids+=($!)
		pids+=($!)
		rows+=("nginx|least_conn|$NGINX_PORT" "nginx|$own|$((NGINX_PORT + 1))")

		# NGINX_LEAST_TIME's least_time, configured as the least_conn row is,
		# and its own cost as the other nginx's.
		if [ -n "$NGINX_LEAST_TIME" ]; then
			scenario_nginx nginx-least-time $((NGINX_PORT + 2)) "least_time header|${servers[*]}" "least_time header inflight|${servers[*]}" "|$fast"
			"$NGINX_LEAST_TIME" -t -q -c "$work/nginx-least-time.conf" -e "$work/nginx-least-time-error.log" ||
				{ echo "e2e: NGINX_LEAST_TIME $NGINX_LEAST_TIME refuses least_time (it needs nginx 1.31.0 or later)" >&2; exit 1; }
			"$NGINX_LEAST_TIME" -c "$work/nginx-least-time.conf" -e "$work/nginx-least-time-error.log" &
			proxy_pids+=($!)
			pids+=($!)
			rows+=("$lt_version|least_time header|$((NGINX_PORT + 2))" "$lt_version|least_time header inflight|$((NGINX_PORT + 3))" "$lt_version|$own|$((NGINX_PORT + 4))")
		fi

		{
			printf 'global\n  maxconn 8192\n\ndefaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n  http-reuse always\n\n'
			printf 'frontend f\n  bind %s:%d\n  default_backend b\n\nbackend b\n  balance leastconn\n' "$HOST" "$HAPROXY_PORT"
			for i in "${!servers[@]}"; do printf '  server s%d %s\n' "$i" "${servers[$i]}"; done
		} >"$work/haproxy-scenario.cfg"
		haproxy -db -f "$work/haproxy-scenario.cfg" >"$work/haproxy.log" 2>&1 &
		proxy_pids+=($!)
		pids+=($!)
		rows+=("HAProxy|leastconn|$HAPROXY_PORT")

		# "policy|more reverse_proxy directives|upstreams" (see start_caddy):
		# the fifth row adds Caddy's passive health checks counting 5xx
		# answers, which is how a Caddy user keeps a fast-failing upstream
		# out; the last is Caddy's own cost.
		local policies=("fair|" "weighted_least_conn|" "least_conn|" "random_choose 2|" "fair|fail_duration 10s; unhealthy_status 5xx" "round_robin||$fast") port pol more proxy
		start_caddy "$work/Caddyfile-scenario" "${policies[@]}"
		port=$CADDY_PORT
		for pol in "${policies[@]}"; do
			case "$pol" in fair* | weighted_least_conn*) proxy="Caddy+lbpack" ;; *) proxy="Caddy" ;; esac
			more="${pol#*|}"
			case "$more" in
			*"|"*) pol="$own" ;;
			*) pol="${pol%%|*}${more:+, $more}" ;;
			esac
			rows+=("$proxy|$pol|$port")
			port=$((port + 1))
		done

		wait_port $((NGINX_PORT + 1))
		[ -z "$NGINX_LEAST_TIME" ] || wait_port $((NGINX_PORT + 4))
		wait_port "$HAPROXY_PORT"
		wait_port $((CADDY_PORT + ${#policies[@]} - 1)) || { tail -20 "$work/caddy.log" >&2; exit 1; }
		rm -f "$work"/srow*.runs "$work"/srow*.counts
		run_rows rate_once scenario_line "$scen"
		for pid in "${proxy_pids[@]}"; do stop "$pid"; done
		stop "$backend_pid"
	done
	{
		echo "Generated by \`${lt_version:+NGINX_LEAST_TIME=/path/to/${lt_version/\//-} }PARTS=scenarios bench/e2e.sh\` on $(date -u +%Y-%m-%d): $(nproc) CPUs shared by the load generator, the proxies and the backends"
		echo "(and whatever else runs on the machine: load average over 1, 5 and 15 minutes $load_before at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end)."
		echo "Five backends in one Go process (bench/cmd/backend), each serving 4 requests at a time (the others wait), answering in 5 ms;"
		echo "backend e answers in 50 ms (slow) or with a 500 at once (failing). bench/cmd/rate sends $RATE requests/s for $SCENARIO_DURATION per run"
		echo "(an open loop: latency counts from when a request was due), $ROUNDS rounds over all rows, the round with the median p99 shown (and the lowest and highest p99 of the rounds);"
		echo "errors are answers other than 2xx and requests with no answer, over all rounds; shares are each backend's percentage of the requests (the warm-up request before each run included), over all rounds."
		echo "The fast backends can serve 800 requests/s each, the slow one 80: an even split would give it 20% of $RATE."
		echo "Proxies: Caddy $caddy_version built by $caddy_from (no retries; no health checks but in the row that says so);"
		echo "$(nginx -v 2>&1 | sed 's/.*: //') least_conn (upstream keepalive 64, worker_processes auto, no zone); $(haproxy -v | head -1 | awk '{print "HAProxy " $3}') leastconn."
		[ -z "$lt_version" ] || echo "$lt_version (NGINX_LEAST_TIME, configure arguments: $("$NGINX_LEAST_TIME" -V 2>&1 | sed -n 's/^configure arguments: *//p')): least_time header and least_time header inflight, configured as least_conn."
		echo "\"$own\": the proxy with round robin over the four good backends alone, as a policy that knew the bad one would do: what is left of a row's p99 above it is its policy's cost."
		echo
		echo "| scenario | proxy | policy | p50 ms | p99 ms | p99 ms, rounds | errors | shares a / b / c / d / e |"
		echo "|---|---|---|---:|---:|---:|---:|---|"
		awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$work/scenarios.tsv"
	} >"$work/scenarios.md"
}

has_part throughput && throughput_part
has_part scenarios && scenarios_part

# Each part's text goes between its markers in docs/e2e.md; the rest of the
# file (the prose around the tables) is kept.
if ! grep -q '^<!-- e2e throughput -->$' "$out" 2>/dev/null; then
	printf '# End to end on loopback\n\n<!-- e2e throughput -->\n<!-- /e2e throughput -->\n\n## Slow and failing backends\n\n<!-- e2e scenarios -->\n<!-- /e2e scenarios -->\n' >"$out"
fi
for part in $PARTS; do
	awk -v name="$part" -v body="$work/$part.md" '
		$0 == "<!-- e2e " name " -->" { print; while ((getline line < body) > 0) print line; skip = 1; next }
		$0 == "<!-- /e2e " name " -->" { skip = 0 }
		!skip { print }' "$out" >"$work/e2e.md.new"
	cp "$work/e2e.md.new" "$out"
done
echo "== wrote $out"
