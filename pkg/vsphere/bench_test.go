package vsphere

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/soap"
)

// benchVM has 16 disks on four controllers and 8 NICs.
func benchDisks() []diskSpec {
	var disks []diskSpec
	for i := range 16 {
		switch {
		case i < 6:
			disks = append(disks, diskSpec{ctrl: "pvscsi", bus: 0, sizeMiB: 64, prov: ProvisioningThin})
		case i < 10:
			disks = append(disks, diskSpec{ctrl: "pvscsi", bus: 1, sizeMiB: 64, prov: ProvisioningThick})
		case i < 13:
			disks = append(disks, diskSpec{ctrl: "sata", bus: 0, sizeMiB: 64, prov: ProvisioningThin})
		default:
			disks = append(disks, diskSpec{ctrl: "nvme", bus: 0, sizeMiB: 64, prov: ProvisioningEagerZeroedThick})
		}
	}
	return disks
}

func benchNICs(kind modelKind) []nicSpec {
	var nics []nicSpec
	adapters := []string{"vmxnet3", "e1000e", "e1000", "vmxnet3"}
	for i := range 8 {
		net := "VM Network"
		if kind == vpx && i%2 == 1 {
			net = "DC0_DVPG0"
		}
		nics = append(nics, nicSpec{adapter: adapters[i%len(adapters)], network: net, mac: fmt.Sprintf("00:50:56:bb:00:%02x", i)})
	}
	return nics
}

// BenchmarkInventory reads the inventory of a VM with 16 disks and 8 NICs
// and reports SOAP round trips and time per inventory.
func BenchmarkInventory(b *testing.B) {
	for _, kind := range bothModels {
		b.Run(string(kind), func(b *testing.B) {
			env := newSim(b, kind, nil)
			var calls atomic.Int64
			s := env.connect(b, WithRoundTripper(func(next soap.RoundTripper) soap.RoundTripper {
				return roundTripCounter{next: next, n: &calls}
			}))
			vm := buildVM(b, s, "bench-vm", benchDisks(), benchNICs(kind))
			ctx := testCtx(b)
			inv, err := Inventory(ctx, s, vm)
			require.NoError(b, err, "inventory")
			require.Len(b, inv.Disks, 16, "inventory disks")
			require.Len(b, inv.NICs, 8, "inventory NICs")

			calls.Store(0)
			start := time.Now()
			b.ResetTimer()
			for b.Loop() {
				_, err := Inventory(ctx, s, vm)
				require.NoError(b, err, "inventory")
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(float64(calls.Load())/n, "roundtrips/op")
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/n, "ms/inventory")
		})
	}
}

type roundTripCounter struct {
	next soap.RoundTripper
	n    *atomic.Int64
}

func (c roundTripCounter) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	c.n.Add(1)
	return c.next.RoundTrip(ctx, req, res)
}
