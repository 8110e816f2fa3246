package builders

import (
	"encoding/json"
	"fmt"
	"strings"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/transfer/wire"
)

// ConvertedChecksumLines are the conversion script's block-tree lines of
// m's disks ("tree <disk> <bytes> <root> <re-hashed bytes>"), as the
// conversion pod puts them first in its termination message: each disk
// changed by the conversion (its root is not the transferred one), 4 MiB
// of it re-hashed (at most the disk).
func ConvertedChecksumLines(m *v1alpha1.VirtualMachineMigration) string {
	var b strings.Builder
	for _, d := range m.Status.Disks {
		fmt.Fprintf(&b, "tree %s %d %064x %d\n", d.Name, d.CapacityBytes, d.Key+7, min(d.CapacityBytes, 4<<20))
	}
	return b.String()
}

// ReadBackResult is vm-transfer hash's result, as the verification pod's
// termination message, over m's target disks, each holding its converted
// bytes (status.disks[].checksums.converted) in an image extra bytes
// larger than the disk.
func ReadBackResult(m *v1alpha1.VirtualMachineMigration, extra int64) (string, error) {
	res := wire.HashResult{Kind: wire.KindHash}
	for _, d := range m.Status.Disks {
		res.Images = append(res.Images, wire.ImageHash{Name: "target/" + d.Name, Bytes: d.CapacityBytes,
			Size: d.CapacityBytes + extra, SHA256: d.ConvertedSHA256()})
	}
	data, err := json.Marshal(res)
	if err != nil {
		return "", fmt.Errorf("encoding the hash result: %w", err)
	}
	return string(data), nil
}
