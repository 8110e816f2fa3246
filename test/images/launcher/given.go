package launcher

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// maxInstanceBytes bounds an instance put to InstancePath.
const maxInstanceBytes = 1 << 20

// switchHandler serves with the handler last set: the waiting launcher's,
// then the running one's.
type switchHandler struct {
	mu sync.RWMutex
	h  http.Handler
}

func (s *switchHandler) set(h http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h = h
}

func (s *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	h := s.h
	s.mu.RUnlock()
	h.ServeHTTP(w, r)
}

// readInstance decodes the instance of a request's body.
func readInstance(r *http.Request) (*kubevirtv1.VirtualMachineInstance, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxInstanceBytes)).Decode(vmi); err != nil {
		return nil, fmt.Errorf("the instance: %w", err)
	}
	return vmi, nil
}

// waitingHandler serves a launcher without instance: Status says
// StateWaiting, ReadyPath 503, and the first instance of uid put to
// InstancePath goes to given (202); another instance is refused (409).
func waitingHandler(uid string, given chan<- *kubevirtv1.VirtualMachineInstance) http.Handler {
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+StatusPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Status{QEMU: QEMUStatus{State: StateWaiting}})
	})
	mux.HandleFunc("GET "+ReadyPath, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "qemu "+StateWaiting, http.StatusServiceUnavailable)
	})
	mux.HandleFunc("PUT "+InstancePath, func(w http.ResponseWriter, r *http.Request) {
		vmi, err := readInstance(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if string(vmi.UID) != uid {
			http.Error(w, fmt.Sprintf("this launcher is instance %s's, not %s's", uid, vmi.UID), http.StatusConflict)
			return
		}
		once.Do(func() { given <- vmi })
		w.WriteHeader(http.StatusAccepted)
	})
	return mux
}
