package conformance

import "github.com/lbpack/lbpack/conformance/stickydata"

// The recordings' schema (one file per family of cases under
// testdata/sticky; README.md there describes every field) is package
// stickydata's, which the replays in other packages read too; these names
// keep the tests' own. The recorder (sticky_record_test.go) writes the
// files from a real nginx; the data test (sticky_data_test.go) checks that
// they are consistent.
type (
	stickyFamily     = stickydata.Family
	stickyCase       = stickydata.Case
	stickyServer     = stickydata.Server
	stickyConfigTest = stickydata.ConfigTest
	stickyExchange   = stickydata.Exchange
	stickySends      = stickydata.Sends
	stickyReply      = stickydata.Reply
)

func stickySID(s stickyServer) string { return stickydata.SID(s) }

func md5hex(s string) string { return stickydata.MD5Hex(s) }
