package vcsimlocal

import (
	"net/http"
	"time"
)

// paceSlice is the most a paced download sends at once.
const paceSlice = 64 << 10

// pace limits the rate at which one VM's flat extents are served.
type pace struct {
	// rate is in bytes per second.
	rate int64
	// next is when the bytes granted so far have all been sent.
	next time.Time
}

// PaceExtentReads limits how fast the flat extents of a VM are served, in
// bytes per second over all its downloads together, as a slow datastore
// would; 0 removes the limit, for the downloads under way too. Tests use
// it to keep a transfer in flight long enough to interrupt it mid-copy.
func (s *Server) PaceExtentReads(vm string, bytesPerSecond int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if bytesPerSecond <= 0 {
		delete(s.paces, vm)
		return
	}
	if s.paces == nil {
		s.paces = map[string]*pace{}
	}
	s.paces[vm] = &pace{rate: bytesPerSecond}
}

// paced wraps the response writer of a flat-extent download from a VM
// folder so that it keeps to the folder's pace, if it has one.
func (s *Server) paced(folder string, w http.ResponseWriter) http.ResponseWriter {
	return &pacedWriter{ResponseWriter: w, wait: func(n int) { s.paceWait(folder, n) }}
}

// paceWait waits until n more bytes of a VM folder may be sent.
func (s *Server) paceWait(folder string, n int) {
	s.mu.Lock()
	p := s.paces[folder]
	if p == nil {
		s.mu.Unlock()
		return
	}
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	p.next = p.next.Add(time.Duration(int64(n) * int64(time.Second) / p.rate))
	until := p.next
	s.mu.Unlock()
	time.Sleep(time.Until(until))
}

// pacedWriter sends a response in slices, each once its pace allows.
type pacedWriter struct {
	http.ResponseWriter
	wait func(n int)
}

// Write implements io.Writer, slice by slice.
func (p *pacedWriter) Write(b []byte) (int, error) {
	var written int
	for len(b) > 0 {
		n := min(len(b), paceSlice)
		p.wait(n)
		m, err := p.ResponseWriter.Write(b[:n])
		written += m
		if err != nil {
			return written, err
		}
		b = b[n:]
	}
	return written, nil
}

// Flush passes a flush on when the underlying writer can.
func (p *pacedWriter) Flush() {
	if f, ok := p.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
