package sim

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"time"
)

// The chart's geometry, in SVG user units.
const (
	svgPanelW = 420
	svgPanelH = 330
	svgLeft   = 60 // room for the y labels
	svgTop    = 48
	svgGap    = 80
	svgLegend = 360
	svgBottom = 60
)

// svgColors are distinct colours, cycled with dash patterns so that up to
// 3 x len(svgColors) series stay apart.
var svgColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
	"#e377c2", "#17becf", "#7f7f7f", "#bcbd22", "#000000", "#393b79", "#006d2c"}

var svgDashes = []string{"", "6,3", "2,2"}

// WriteCDF writes an SVG chart of the latency distributions in res: on the
// left the CDF (fraction of requests answered within x), on the right the
// tail (fraction slower than x, log scale), both over log-scaled latency.
// The chart is written by hand (no plotting library), so that package sim
// and lbsim stay on the standard library.
func WriteCDF(w io.Writer, title string, res []Result) error {
	lo, hi := math.Inf(1), 0.0
	for _, r := range res {
		if len(r.Latencies) == 0 {
			continue
		}
		lo = math.Min(lo, ms64(Percentile(r.Latencies, 0.01)))
		hi = math.Max(hi, ms64(Percentile(r.Latencies, 0.9999)))
	}
	if hi == 0 {
		lo, hi = 1, 10
	}
	xlo := math.Pow(10, math.Floor(math.Log10(math.Max(lo, 0.01))))
	xhi := math.Pow(10, math.Ceil(math.Log10(math.Max(hi, xlo*10))))
	const ylo = 1e-4 // the tail panel's floor: 1 request in 10,000

	bw := bufio.NewWriter(w)
	width := svgLeft + 2*svgPanelW + svgGap + svgLegend
	height := svgTop + svgPanelH + svgBottom
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(bw, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(bw, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", svgLeft, html.EscapeString(title))

	lx := func(x float64) float64 { return math.Log10(x/xlo) / math.Log10(xhi/xlo) * svgPanelW }
	panels := []struct {
		x0    float64
		label string
		y     func(q float64) float64 // panel y of quantile q, 0 top
		ticks []float64
		tick  func(v float64) (float64, string)
	}{
		{x0: svgLeft, label: "fraction of requests within x",
			y:     func(q float64) float64 { return (1 - q) * svgPanelH },
			ticks: []float64{0, 0.25, 0.5, 0.75, 1},
			tick:  func(v float64) (float64, string) { return (1 - v) * svgPanelH, fmt.Sprintf("%g", v) }},
		{x0: svgLeft + svgPanelW + svgGap, label: "fraction slower than x (log)",
			y: func(q float64) float64 {
				f := math.Max(1-q, ylo)
				return math.Log10(f) / math.Log10(ylo) * svgPanelH
			},
			ticks: []float64{1, 0.1, 0.01, 0.001, 0.0001},
			tick: func(v float64) (float64, string) {
				return math.Log10(v) / math.Log10(ylo) * svgPanelH, fmt.Sprintf("%g", v)
			}},
	}
	for _, p := range panels {
		fmt.Fprintf(bw, `<g transform="translate(%g,%d)">`+"\n", p.x0, svgTop)
		fmt.Fprintf(bw, `<rect width="%d" height="%d" fill="none" stroke="#444"/>`+"\n", svgPanelW, svgPanelH)
		for _, v := range p.ticks {
			y, s := p.tick(v)
			fmt.Fprintf(bw, `<line x1="0" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="-6" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n",
				svgPanelW, y, y, y, s)
		}
		for x := xlo; x <= xhi*1.0001; x *= 10 {
			px := lx(x)
			fmt.Fprintf(bw, `<line x1="%.1f" x2="%.1f" y1="0" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n",
				px, px, svgPanelH, px, svgPanelH+16, x)
		}
		fmt.Fprintf(bw, `<text x="%d" y="%d" text-anchor="middle">latency (ms, log scale)</text>`+"\n", svgPanelW/2, svgPanelH+36)
		fmt.Fprintf(bw, `<text x="%d" y="-8" text-anchor="middle">%s</text>`+"\n", svgPanelW/2, p.label)
		for k, r := range res {
			if len(r.Latencies) == 0 {
				continue
			}
			fmt.Fprintf(bw, `<polyline fill="none" stroke="%s" stroke-width="%s"%s points="`, svgColors[k%len(svgColors)], stroke(r), dash(k))
			for _, q := range cdfPoints() {
				x := math.Min(math.Max(ms64(Percentile(r.Latencies, q)), xlo), xhi)
				fmt.Fprintf(bw, "%.1f,%.1f ", lx(x), p.y(q))
			}
			fmt.Fprintln(bw, `"/>`)
		}
		fmt.Fprintln(bw, `</g>`)
	}
	// The legend: name and p99 of each series.
	lx0 := svgLeft + 2*svgPanelW + svgGap + 20
	for k, r := range res {
		y := svgTop + 8 + 20*k
		fmt.Fprintf(bw, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2.5"%s/>`,
			lx0, lx0+28, y, y, svgColors[k%len(svgColors)], dash(k))
		fmt.Fprintf(bw, `<text x="%d" y="%d" dominant-baseline="middle">%s: p99 %s</text>`+"\n",
			lx0+36, y, html.EscapeString(r.Policy), msStr(r.P99))
	}
	fmt.Fprintln(bw, `</svg>`)
	return bw.Flush()
}

// stroke is a series' line width: fair's, the row the page is about, is bolder.
func stroke(r Result) string {
	if r.Policy == FairName {
		return "2.8"
	}
	return "1.6"
}

func dash(k int) string {
	d := svgDashes[(k/len(svgColors)+k)%len(svgDashes)]
	if d == "" {
		return ""
	}
	return ` stroke-dasharray="` + d + `"`
}

// cdfPoints are the quantiles drawn: evenly spaced for the body, then
// evenly spaced in log(1-q) for the tail, down to 1 in 10,000.
func cdfPoints() []float64 {
	var q []float64
	for k := 1; k < 100; k++ {
		q = append(q, float64(k)/100)
	}
	for k := 1; k <= 200; k++ {
		q = append(q, 1-math.Pow(10, -1-3*float64(k)/200))
	}
	sort.Float64s(q)
	return q
}

func ms64(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
