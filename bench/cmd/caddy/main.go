// Command caddy is Caddy 2.11.9 with its standard modules and lbpack's
// selection policies: the binary xcaddy.sh builds, made from this module's
// pinned versions. bench/e2e.sh uses it when the repository's xcaddy.sh is
// not available.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/lbpack/lbpack/caddyplugin"
)

func main() {
	caddycmd.Main()
}
