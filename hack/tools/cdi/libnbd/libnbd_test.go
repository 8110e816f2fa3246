package libnbd

import (
	"errors"
	"testing"
)

// TestEveryCallFails checks that no call of the stub pretends to work: each
// returns an error that is ErrNotSupported.
func TestEveryCallFails(t *testing.T) {
	h, err := Create()
	if h != nil || !errors.Is(err, ErrNotSupported) {
		t.Fatalf("Create() = %v, %v; want nil, ErrNotSupported", h, err)
	}
	var handle Libnbd
	_, sizeErr := handle.GetSize()
	calls := map[string]error{
		"AddMetaContext": handle.AddMetaContext("base:allocation"),
		"ConnectUri":     handle.ConnectUri("nbd+unix://?socket=/tmp/s"),
		"GetSize":        sizeErr,
		"Pread":          handle.Pread(make([]byte, 8), 0, nil),
		"BlockStatus":    handle.BlockStatus(8, 0, func(string, uint64, []uint32, *int) int { return 0 }, &BlockStatusOptargs{}),
		"Close":          handle.Close(),
	}
	for name, err := range calls {
		if !errors.Is(err, ErrNotSupported) {
			t.Errorf("%s returned %v, want ErrNotSupported", name, err)
		}
	}
	if got := handle.Close().Error(); got != "libnbd: close: "+ErrNotSupported.Error() {
		t.Errorf("Close().Error() = %q", got)
	}
}
