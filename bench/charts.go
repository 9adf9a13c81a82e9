package bench

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// palette holds distinct colours for up to ten series.
var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x17, 0xbe, 0xcf, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
	color.RGBA{0xbc, 0xbd, 0x22, 0xff},
}

// saveTiles renders plots on a grid into one SVG file.
func saveTiles(path string, plots [][]*plot.Plot, w, h vg.Length) error {
	img := vgsvg.New(w, h)
	dc := draw.New(img)
	t := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, t, dc)
	for j := range plots {
		for i := range plots[j] {
			if plots[j][i] != nil {
				plots[j][i].Draw(canvases[j][i])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := img.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func savePlot(path string, p *plot.Plot, w, h vg.Length) error {
	return saveTiles(path, [][]*plot.Plot{{p}}, w, h)
}

// ChartSmooth draws picks per backend over time, weights 5,3,2: lbpack's
// smooth_wrr against Caddy's weighted_round_robin. Top: which backend each
// pick went to. Bottom: each backend's picks so far minus its ideal share.
func ChartSmooth(path string) error {
	weights := []int{5, 3, 2}
	const picks = 30
	subjects := []string{"lbpack smooth_wrr", "Caddy weighted_round_robin"}
	plots := [][]*plot.Plot{make([]*plot.Plot, 2), make([]*plot.Plot, 2)}
	for col, name := range subjects {
		s, ok := FindSubject(name)
		if !ok {
			return fmt.Errorf("chart: subject %q not available", name)
		}
		seq, err := Sequence(s, weights, picks)
		if err != nil {
			return err
		}
		top := plot.New()
		top.Title.Text = name + " (weights 5,3,2)"
		top.X.Label.Text = "pick"
		top.Y.Label.Text = "backend"
		top.Y.Min, top.Y.Max = -0.5, 2.5
		top.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "a (5)"}, {Value: 1, Label: "b (3)"}, {Value: 2, Label: "c (2)"}})
		top.Add(plotter.NewGrid())
		bottom := plot.New()
		bottom.Title.Text = "picks so far − ideal share"
		bottom.X.Label.Text = "pick"
		bottom.Y.Label.Text = "deviation"
		bottom.Y.Min, bottom.Y.Max = -3, 3
		bottom.Add(plotter.NewGrid())
		for b := range weights {
			pts := plotter.XYs{}
			dev := plotter.XYs{{X: 0, Y: 0}}
			count := 0
			for t, x := range seq {
				if x == b {
					pts = append(pts, plotter.XY{X: float64(t + 1), Y: float64(b)})
					count++
				}
				dev = append(dev, plotter.XY{X: float64(t + 1), Y: float64(count) - float64(t+1)*float64(weights[b])/10})
			}
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return err
			}
			sc.GlyphStyle.Color = palette[b]
			sc.GlyphStyle.Shape = draw.CircleGlyph{}
			sc.GlyphStyle.Radius = vg.Points(4)
			top.Add(sc)
			ln, err := plotter.NewLine(dev)
			if err != nil {
				return err
			}
			ln.Color = palette[b]
			ln.Width = vg.Points(1.5)
			bottom.Add(ln)
			bottom.Legend.Add(letter(b), ln)
		}
		bottom.Legend.Top = true
		plots[0][col], plots[1][col] = top, bottom
	}
	return saveTiles(path, plots, 26*vg.Centimeter, 16*vg.Centimeter)
}

// ChartHash draws balance against disruption for the consistent hash
// schemes at n=100. Schemes that move most keys (modulo, ip_hash) are left
// off the chart and named in its caption instead.
func ChartHash(path string, rows []HashQuality) error {
	const n = 100
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Consistent hashing at n=%d: balance vs disruption", n)
	p.X.Label.Text = "keys moved when one backend leaves / ideal 1/n   (1 is ideal)"
	p.Y.Label.Text = "busiest backend / mean   (1 is ideal)"
	p.Add(plotter.NewGrid())
	type pt struct {
		x, y  float64
		names []string
	}
	var pts []*pt
	for _, q := range rows {
		x, y := q.Leave[n]*n, q.Balance[n]
		if x > 10 {
			continue
		}
		merged := false
		for _, o := range pts {
			if math.Abs(o.x-x) < 0.1 && math.Abs(o.y-y) < 0.06 {
				o.names = append(o.names, q.Subject.Name)
				merged = true
				break
			}
		}
		if !merged {
			pts = append(pts, &pt{x, y, []string{q.Subject.Name}})
		}
	}
	var xys plotter.XYs
	var labels []string
	xmax, ymax := 2.0, 1.3
	for _, o := range pts {
		xys = append(xys, plotter.XY{X: o.x, Y: o.y})
		if len(o.names) >= 3 {
			// A crowd of equally good schemes: one name per line, below the point.
			labels = append(labels, "\n"+strings.Join(o.names, "\n"))
		} else {
			labels = append(labels, "  "+strings.Join(o.names, ", "))
		}
		xmax, ymax = math.Max(xmax, o.x), math.Max(ymax, o.y)
	}
	sc, err := plotter.NewScatter(xys)
	if err != nil {
		return err
	}
	sc.GlyphStyle.Shape = draw.CircleGlyph{}
	sc.GlyphStyle.Radius = vg.Points(4)
	sc.GlyphStyle.Color = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	p.Add(sc)
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return err
	}
	for i := range lb.TextStyle {
		lb.TextStyle[i].Font.Size = vg.Points(9)
		lb.TextStyle[i].YAlign = draw.YCenter
		if strings.HasPrefix(labels[i], "\n") {
			lb.TextStyle[i].YAlign = draw.YTop
			lb.TextStyle[i].XAlign = draw.XCenter
		}
	}
	p.Add(lb)
	p.X.Min, p.X.Max = 0, xmax*1.6
	p.Y.Min, p.Y.Max = 0.5, ymax*1.05
	return savePlot(path, p, 22*vg.Centimeter, 14*vg.Centimeter)
}

// ChartCost draws ns per pick against n, one goroutine, log-log.
func ChartCost(path string, rows []SelRow, sizes []int) error {
	p := plot.New()
	p.Title.Text = "Selection cost vs pool size (one goroutine)"
	p.X.Label.Text = "backends (n)"
	p.Y.Label.Text = "ns per pick"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = plot.ConstantTicks(sizeTicks(sizes))
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	want := []string{"lbpack smooth_wrr", "lbpack url_hash maglev", "lbpack url_hash ketama", "lbpack least_conn",
		"Caddy weighted_round_robin", "Caddy uri_hash", "Caddy least_conn", "O(n) smooth WRR, one mutex",
		"stathat/consistent", "dgryski/go-jump"}
	byName := map[string]SelRow{}
	for _, r := range rows {
		byName[r.Subject.Name] = r
	}
	k := 0
	for _, name := range want {
		r, ok := byName[name]
		if !ok {
			continue
		}
		var xy plotter.XYs
		for _, n := range sizes {
			xy = append(xy, plotter.XY{X: float64(n), Y: math.Max(r.Serial[n].Ns, 0.1)})
		}
		ln, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		ln.Color, pts.Color = palette[k%len(palette)], palette[k%len(palette)]
		ln.Dashes = plotutil.Dashes(k)
		pts.Shape = plotutil.Shape(k)
		ln.Width = vg.Points(1.5)
		p.Add(ln, pts)
		p.Legend.Add(name, ln, pts)
		k++
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return savePlot(path, p, 20*vg.Centimeter, 15*vg.Centimeter)
}

func sizeTicks(sizes []int) []plot.Tick {
	s := append([]int(nil), sizes...)
	sort.Ints(s)
	t := make([]plot.Tick, len(s))
	for i, n := range s {
		t[i] = plot.Tick{Value: float64(n), Label: fmt.Sprint(n)}
	}
	return t
}
