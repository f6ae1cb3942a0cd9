// Command coredns is the local cluster's DNS server: CoreDNS (the module this wrapper requires)
// with only the plugins hack/cluster/config/Corefile.tmpl uses. CoreDNS's own main package links
// every plugin it ships, cloud providers' SDKs included (`go install` of it fetched 197 modules,
// 1.6 GB, here); this one fetches 78 (250 MB), builds with 40% less CPU time and is 55 MB
// instead of 79. A Corefile can enable only the directives listed below: any other, forward
// included, is an unknown directive, so the server cannot be made to send a query off the
// machine. (The kubernetes plugin imports metadata, prometheus and transfer, which register
// themselves but stay unusable for the same reason.) hack/coredns/build.sh builds it.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// Each import registers one plugin under its directive name.
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives are the plugins compiled in, in the order a query passes through them: the same
// relative order as CoreDNS's own list (core/dnsserver/zdirectives.go), which a plugin's
// behaviour depends on (cache must sit in front of kubernetes to cache its answers).
var directives = []string{
	"bind",
	"ready",
	"health",
	"errors",
	"cache",
	"kubernetes",
}

func main() {
	// coremain reads the list when it parses the Corefile, after every package's init.
	dnsserver.Directives = directives
	coremain.Run()
}
