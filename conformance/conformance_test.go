// Package conformance runs the official Gateway API conformance suite
// (sigs.k8s.io/gateway-api/conformance) against Portico. Built with `go test -c` by
// scripts/conformance-tools; run the binary against a cluster (KUBECONFIG or --kubeconfig)
// with the suite's own flags, e.g.
//
//	conformance.test -test.v --gateway-class=portico \
//	  --conformance-profiles=GATEWAY-HTTP --report-output=report.yaml
//
// With no --supported-features / --exempt-features / --all-features / --run-test the suite
// takes the features from the GatewayClass's status.supportedFeatures.
package conformance_test

import (
	"testing"

	"sigs.k8s.io/gateway-api/conformance"
)

func TestConformance(t *testing.T) {
	opts := conformance.DefaultOptions(t)
	// The report must name the implementation; the suite's flags (--organization, --project,
	// --url, --version, --contact) still override these defaults.
	impl := &opts.Implementation
	if impl.Organization == "" {
		impl.Organization = "portico"
	}
	if impl.Project == "" {
		impl.Project = "portico"
	}
	if impl.URL == "" {
		impl.URL = "https://github.com/portico-dev/portico"
	}
	if impl.Version == "" {
		impl.Version = "dev"
	}
	if len(impl.Contact) == 0 {
		impl.Contact = []string{"https://github.com/portico-dev/portico/issues"}
	}
	conformance.RunConformanceWithOptions(t, opts)
}
