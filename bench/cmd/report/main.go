// Command report regenerates lbpack's comparison pages and charts in docs/.
//
//	cd bench && go run ./cmd/report [-docs ../docs] [-benchtime 500ms] [-only selection,quality,simulation,fleet]
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/lbpack/lbpack/bench"
)

func main() {
	testing.Init()
	docs := flag.String("docs", "../docs", "directory to write the pages and charts to")
	benchtime := flag.String("benchtime", "500ms", "time per benchmark (as go test -benchtime)")
	only := flag.String("only", strings.Join(bench.AllParts, ","), "comma-separated parts to regenerate")
	flag.Parse()
	if err := flag.Set("test.benchtime", *benchtime); err != nil {
		fmt.Fprintln(os.Stderr, "report: -benchtime:", err)
		os.Exit(2)
	}
	parts := strings.Split(*only, ",")
	for _, p := range parts {
		ok := false
		for _, a := range bench.AllParts {
			ok = ok || p == a
		}
		if !ok {
			fmt.Fprintf(os.Stderr, "report: -only: unknown part %q (want %s)\n", p, strings.Join(bench.AllParts, ", "))
			os.Exit(2)
		}
	}
	if err := os.MkdirAll(*docs, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	err := bench.Report(*docs, parts, func(s string) { fmt.Fprintln(os.Stderr, s) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}
