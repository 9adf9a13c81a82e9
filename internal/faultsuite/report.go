package faultsuite

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Row is one line of the table: a host and configuration, what its fault
// run measured, what it answered with every backend down, and what it
// left behind.
type Row struct {
	Host   string // "nginx", "Caddy", "Traefik plugin"
	Case   string // the policy and its settings
	Result Result
	Down   Down
	// Goroutines is how many more goroutines the process had once the
	// proxy was stopped and the backends down than before the case
	// started them; -1 when not applicable (a proxy in another process).
	Goroutines int
	Sockets    int // connections to the backends or the proxy still open
}

// Targets are what a case must meet beyond what every case must meet.
type Targets struct {
	// BackAgain: the restarted backend gets traffic again (the run goes on
	// up to BackWait past its end for it).
	BackAgain bool
	// OutSoon: no try of the dead backend in the second half of its down
	// time (active health checks have taken it out by then). Not asserted
	// under the race detector, whose slowed checkers (on a machine shared
	// with other tests) may take longer.
	OutSoon bool
	// Ramp: the restarted backend, under slow start, takes in its first
	// window back at most 60% of the share it has in its last, and at
	// least 20% (of three equal backends) in its last.
	Ramp bool
	// DownWithin bounds each all-down answer (default 3 s): longer is a hang.
	DownWithin time.Duration
}

// Problems lists the targets the row misses. Every case must have: no
// client-visible GET error while two backends live, no POST lost but those
// the kill may have cut (see CutGrace), every body intact, with every
// backend down only
// 502/503 answers within DownWithin, and nothing left behind.
func (r Row) Problems(t Targets) []string {
	if t.DownWithin == 0 {
		t.DownWithin = 3 * time.Second
	}
	res := r.Result
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if res.GETErrors > 0 {
		add("%d GETs of %d failed with two backends alive: %s", res.GETErrors, res.Sent, strings.Join(res.FirstErrors, "; "))
	}
	if res.LostPOSTs > 0 {
		add("%d POSTs failed that the kill did not cut: %s", res.LostPOSTs, strings.Join(res.FirstErrors, "; "))
	}
	if res.BadBodies > 0 || res.Bodies == 0 {
		add("%d of %d request bodies arrived damaged", res.BadBodies, res.Bodies)
	}
	if t.BackAgain && res.BackAfter < 0 {
		add("the restarted backend got no request before the end")
	}
	if t.OutSoon && !raceEnabled && res.LateTries > 0 {
		add("%d tries of the dead backend in the second half of its down time", res.LateTries)
	}
	if t.Ramp {
		if n := len(res.Ramp); n < 2 || res.Ramp[0] > 0.6*res.Ramp[n-1] || res.Ramp[n-1] < 0.2 {
			add("slow start: the restarted backend's shares per %s from its first answer were %s: want the first at most 60%% of the last, the last at least 20%%",
				ms(500*time.Millisecond), percents(res.Ramp))
		}
	}
	if !r.Down.Prompt(t.DownWithin) {
		add("with every backend down: %s, want only 502/503 within %s", r.Down, t.DownWithin)
	}
	if r.Goroutines > 0 {
		add("%d goroutines more after the case than before it", r.Goroutines)
	}
	if r.Sockets > 0 {
		add("%d connections still open", r.Sockets)
	}
	return p
}

// hostOrder is the order of the table's hosts: the anchor first.
var hostOrder = []string{"nginx", "Caddy", "Traefik plugin"}

// Markers around the generated table in docs/reliability.md.
const (
	beginMark = "<!-- fault table: generated, see above -->"
	endMark   = "<!-- end of fault table -->"
)

const tableHead = "| host | case | requests | GET errors | POST errors (POSTs the kill may cut) | bodies damaged / checked | tries of the dead backend (last after kill; in its 2nd half) | traffic again after restart | its share per 0.5 s from its first answer | p99 / max while one is down | every backend down | left behind (goroutines, connections) |\n" +
	"|---|---|---:|---:|---:|---:|---|---:|---|---|---|---|\n"

// Markdown is the row as a table line.
func (r Row) Markdown() string {
	res := r.Result
	tries := "not observable"
	if res.TriesDead >= 0 {
		last := "none"
		if res.LastTry >= 0 {
			last = ms(res.LastTry)
		}
		tries = fmt.Sprintf("%d (%s; %d)", res.TriesDead, last, res.LateTries)
	}
	back := "never"
	if res.BackAfter >= 0 {
		back = ms(res.BackAfter)
	}
	left := fmt.Sprintf("%d, %d", r.Goroutines, r.Sockets)
	if r.Goroutines < 0 {
		left = fmt.Sprintf("n/a, %d", r.Sockets)
	}
	return fmt.Sprintf("| %s | %s | %d | %d | %d (%d) | %d / %d | %s | %s | %s | %s / %s | %s | %s |\n",
		r.Host, r.Case, res.Sent, res.GETErrors, res.POSTErrors, res.POSTsCut, res.BadBodies, res.Bodies,
		tries, back, percents(res.Ramp), ms(res.P99), ms(res.Max), r.Down, left)
}

// WriteRows replaces, in the table of the markdown file at path, the rows
// of the hosts in rows by rows, and keeps the other hosts' rows.
func WriteRows(path string, rows []Row) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(doc)
	b := strings.Index(text, beginMark)
	e := strings.Index(text, endMark)
	if b < 0 || e < b {
		return fmt.Errorf("%s: no %q ... %q section", path, beginMark, endMark)
	}
	mine := map[string]bool{}
	for _, r := range rows {
		mine[r.Host] = true
	}
	byHost := map[string][]string{}
	for _, line := range strings.Split(text[b+len(beginMark):e], "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| host |") {
			continue
		}
		host := strings.TrimSpace(strings.SplitN(line[2:], "|", 2)[0])
		if !mine[host] {
			byHost[host] = append(byHost[host], line+"\n")
		}
	}
	for _, r := range rows {
		byHost[r.Host] = append(byHost[r.Host], r.Markdown())
	}
	var sb strings.Builder
	sb.WriteString(beginMark + "\n\n" + tableHead)
	for _, h := range hostOrder {
		for _, line := range byHost[h] {
			sb.WriteString(line)
		}
	}
	sb.WriteString("\n")
	return os.WriteFile(path, []byte(text[:b]+sb.String()+text[e:]), 0o644)
}

// percents formats shares as whole percentages.
func percents(shares []float64) string {
	p := make([]string, len(shares))
	for k, s := range shares {
		p[k] = fmt.Sprintf("%.0f%%", 100*s)
	}
	return strings.Join(p, " ")
}

// ms formats d in milliseconds, or seconds from 10 s up.
func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}
