// Package conformance holds lbpack's nginx conformance suite: its tests start
// a real nginx on loopback and check that package core chooses what nginx
// chose, request for request.
//
// One nginx (worker_processes 1, since nginx keeps round robin state per
// worker) serves every case of a test from one configuration: an upstream
// block per case, with a location in front of it. The upstream servers are
// small Go HTTP servers on loopback that answer with their own address, and
// nginx reports the address it tried in a response header, so each response
// names the backend nginx picked (and shows that it picked only one). The
// requests of a case go out one after another, so the responses come back in
// pick order; the same requests then go to a fresh core.Balancer built from
// the same backends in the same order, and the two sequences must agree.
//
// The cases come from fixed seeds:
//
//   - smooth weighted round robin (smooth_wrr): random weight sets of 2 to 8
//     servers, some down, some with unused backups, over whole periods;
//   - backup servers: every primary down, so nginx shares out among the
//     backups;
//   - ip_hash: random IPv4 and IPv6 clients, given to nginx through the realip
//     module's X-Real-IP header, with weights and down servers;
//   - hash $arg_k consistent (url_hash ketama) and hash $arg_k (url_hash
//     modulo): random raw query arguments, including percent escapes and
//     empty keys, with weights and down servers;
//   - least_conn with sequential requests, where every server ties at zero
//     connections and nginx shares out by smooth weighted round robin, and
//     with requests held in flight, so that connection counts differ;
//   - max_conns: servers filled by held requests are skipped by every method
//     (core counts the requests in flight from the pick to its Done);
//   - backends on [::1] beside 127.0.0.1, whose names ketama hashes with
//     their brackets;
//   - the lbsim command line: "lbsim pick" prints what nginx picked;
//   - the nginx converter (convert_test.go): the suite's own nginx.conf and
//     the realistic files under testdata/convert are converted with "lbsim
//     convert", Caddy runs the result in this process, and every request
//     must reach the backend nginx chose; with a backend killed, no request
//     that nginx served may fail in Caddy.
//
// Mostly-down sets make the hash methods exhaust their 20 tries and fall back
// to round robin, so the fallback's state is compared too. A request is held
// in flight by a query parameter that makes its backend wait for the test's
// signal; the test goes on once the backend has it, so nginx has counted it.
//
// Sticky sessions (nginx >= 1.29.6) are not in Debian's nginx: testdata/sticky
// holds what an nginx 1.31.4 answered, recorded by hand with
// TestRecordSticky (-record-sticky, and NGINX131 naming the binary). CI checks
// those recordings without nginx (TestStickyRecordings); they are to be
// replayed through core once core has sticky sessions.
//
// The tests need the nginx binary (Debian's nginx package: it has the realip
// and upstream hash modules). They look for it in $NGINX, then $PATH and the
// usual sbin directories. Without it they skip, unless the CI environment
// variable is set, in which case they fail.
package conformance
