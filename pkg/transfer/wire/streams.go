package wire

// Streams and the per-host connection budget.
//
// A transfer reads each disk over one or more Range connections to the
// datastore HTTP interface (vm-transfer --streams K), beside one SOAP
// connection for its session. ESXi bounds the connections it serves at
// once: NFC, which serves these reads, shares 48 MB of buffers between all
// its connections on a host (about 48 streams of 1 MB), and older hosts
// and vCenter's proxy allow about 23 per host. The controller therefore
// gives each disk as many streams as a per-host budget allows when every
// transfer slot of a host is busy.
const (
	// DefaultStreamsPerDisk is the most streams a disk gets by default.
	DefaultStreamsPerDisk = 4
	// DefaultHostConnections is the default budget of connections all
	// transfers from one host may hold at once: under the 23 of older
	// hosts and vCenter's proxy, and well under the 48 NFC buffers of a
	// current host, leaving room for backups and the vSphere client.
	DefaultHostConnections = 20
	// DefaultParallelDisks is how many disks vm-transfer copies at once
	// unless told otherwise (its --parallel).
	DefaultParallelDisks = 2
)

// StreamsPerDisk is how many streams each disk of a transfer may use so
// that transfersPerHost transfers, each with its SOAP connection and
// parallelDisks disks copied at once, hold at most hostConnections
// connections to one host: at most want, at least 1. Without a bound on
// transfers per host (0) the budget cannot be shared out: one stream.
func StreamsPerDisk(want, hostConnections, transfersPerHost, parallelDisks int) int {
	if want < 1 || transfersPerHost < 1 || parallelDisks < 1 {
		return 1
	}
	perTransfer := hostConnections/transfersPerHost - 1
	return max(1, min(want, perTransfer/parallelDisks))
}
