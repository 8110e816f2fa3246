package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/vmware/govmomi/vim25/soap"
)

// Downloader issues datastore HTTP requests with the session's cookie and
// TLS settings. *soap.Client (and so *vim25.Client) implements it.
type Downloader interface {
	DownloadRequest(ctx context.Context, u *url.URL, param *soap.Download) (*http.Response, error)
}

// ErrBadResponse says the server answered a request with something other
// than the bytes asked for: a wrong status, Content-Range or length, or a
// body that ended early or ran long.
var ErrBadResponse = errors.New("bad response from datastore")

// StatusError is a datastore HTTP answer with an unexpected status.
type StatusError struct {
	// Name of the file asked for.
	Name string
	// Code is the HTTP status code.
	Code int
}

// Error says what the status means for the transfer.
func (e *StatusError) Error() string {
	hint := ""
	switch e.Code {
	case http.StatusUnauthorized, http.StatusForbidden:
		hint = ": not authorized (wrong credentials or the session expired)"
	case http.StatusNotFound:
		hint = ": no such file on the datastore"
	case http.StatusRequestedRangeNotSatisfiable:
		hint = ": range not satisfiable (the file is shorter than expected)"
	}
	return fmt.Sprintf("datastore file %s: HTTP %d %s%s", e.Name, e.Code, http.StatusText(e.Code), hint)
}

// Temporary says a retry may succeed (server errors and throttling).
func (e *StatusError) Temporary() bool {
	return e.Code >= 500 || e.Code == http.StatusTooManyRequests
}

// FileInfo is what a HEAD says about a datastore file.
type FileInfo struct {
	// Size in bytes.
	Size int64
	// Validator identifies the file's version (ETag, else Last-Modified), to
	// notice on resume that it changed.
	Validator string
}

// DatastoreFile is one file served by the datastore HTTP interface.
type DatastoreFile struct {
	// Client sends the requests.
	Client Downloader
	// URL of the file (https://host/folder/<path>?dcPath=..&dsName=..).
	URL *url.URL
	// Name of the file in messages, "[datastore] path".
	Name string
}

// Stat returns the file's size, from a HEAD, or from a one-byte range GET
// when the server does not answer HEAD.
func (f *DatastoreFile) Stat(ctx context.Context) (FileInfo, error) {
	res, err := f.Client.DownloadRequest(ctx, f.URL, &soap.Download{Method: http.MethodHead})
	if err != nil {
		return FileInfo{}, fmt.Errorf("stat %s: %w", f.Name, err)
	}
	_ = res.Body.Close()
	switch {
	case res.StatusCode == http.StatusOK && res.ContentLength >= 0:
		return FileInfo{Size: res.ContentLength, Validator: validator(res)}, nil
	case res.StatusCode == http.StatusMethodNotAllowed, res.StatusCode == http.StatusNotImplemented, res.StatusCode == http.StatusOK:
		// No HEAD, or no length in it: ask for one byte and read the total.
	default:
		return FileInfo{}, &StatusError{Name: f.Name, Code: res.StatusCode}
	}
	res, err = f.Client.DownloadRequest(ctx, f.URL, &soap.Download{Method: http.MethodGet, Headers: map[string]string{"Range": "bytes=0-0"}})
	if err != nil {
		return FileInfo{}, fmt.Errorf("stat %s: %w", f.Name, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusPartialContent {
		return FileInfo{}, &StatusError{Name: f.Name, Code: res.StatusCode}
	}
	_, _, total, err := parseContentRange(res.Header.Get("Content-Range"))
	if err != nil || total < 0 {
		return FileInfo{}, fmt.Errorf("stat %s: %w: Content-Range %q gives no size", f.Name, ErrBadResponse, res.Header.Get("Content-Range"))
	}
	return FileInfo{Size: total, Validator: validator(res)}, nil
}

// ReadSmall reads a whole small file (a descriptor), refusing one longer than limit.
func (f *DatastoreFile) ReadSmall(ctx context.Context, limit int64) ([]byte, error) {
	res, err := f.Client.DownloadRequest(ctx, f.URL, &soap.Download{Method: http.MethodGet})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, &StatusError{Name: f.Name, Code: res.StatusCode}
	}
	if res.ContentLength > limit {
		return nil, fmt.Errorf("reading %s: %w: it is %d bytes, a text descriptor is at most %d", f.Name, ErrUnsupportedDisk, res.ContentLength, limit)
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("reading %s: %w: it is more than %d bytes, a text descriptor is at most that", f.Name, ErrUnsupportedDisk, limit)
	}
	if res.ContentLength >= 0 && int64(len(data)) != res.ContentLength {
		return nil, fmt.Errorf("reading %s: %w: got %d bytes of %d", f.Name, ErrBadResponse, len(data), res.ContentLength)
	}
	return data, nil
}

// OpenRange returns exactly the bytes [start, end) of a file of size total.
// The answer must be a 206 whose Content-Range is exactly that range (or a
// 200 with the whole file when the whole file was asked for); the reader
// fails with ErrBadResponse when the body ends early or runs long.
func (f *DatastoreFile) OpenRange(ctx context.Context, start, end, total int64) (io.ReadCloser, error) {
	if start < 0 || end <= start || end > total {
		return nil, fmt.Errorf("reading %s: invalid range [%d, %d) of %d bytes", f.Name, start, end, total)
	}
	rng := fmt.Sprintf("bytes=%d-%d", start, end-1)
	res, err := f.Client.DownloadRequest(ctx, f.URL, &soap.Download{Method: http.MethodGet, Headers: map[string]string{"Range": rng}})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name, err)
	}
	fail := func(format string, args ...any) (io.ReadCloser, error) {
		_ = res.Body.Close()
		return nil, fmt.Errorf("reading %s %s: %w: %s", f.Name, rng, ErrBadResponse, fmt.Sprintf(format, args...))
	}
	switch res.StatusCode {
	case http.StatusPartialContent:
		cr := res.Header.Get("Content-Range")
		first, last, size, err := parseContentRange(cr)
		if err != nil {
			return fail("%v", err)
		}
		if first != start || last != end-1 || (size >= 0 && size != total) {
			return fail("Content-Range %q, want bytes %d-%d/%d", cr, start, end-1, total)
		}
	case http.StatusOK:
		if start != 0 || end != total {
			return fail("the server ignored the Range header (HTTP 200)")
		}
	default:
		_ = res.Body.Close()
		return nil, &StatusError{Name: f.Name, Code: res.StatusCode}
	}
	if res.ContentLength >= 0 && res.ContentLength != end-start {
		return fail("Content-Length %d, want %d", res.ContentLength, end-start)
	}
	return &exactReader{body: res.Body, left: end - start, name: f.Name, rng: rng}, nil
}

// exactReader passes on exactly left bytes and fails on a short or long body.
type exactReader struct {
	body io.ReadCloser
	left int64
	name string
	rng  string
}

// Read reads at most the bytes still expected; at the end it checks that
// the body has nothing more.
func (r *exactReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		var one [1]byte
		n, err := r.body.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("reading %s %s: %w: the body runs past its range", r.name, r.rng, ErrBadResponse)
		}
		if err == nil || err == io.EOF {
			return 0, io.EOF
		}
		return 0, err
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.body.Read(p)
	r.left -= int64(n)
	if (err == io.EOF || err == io.ErrUnexpectedEOF) && r.left > 0 {
		return n, fmt.Errorf("reading %s %s: %w: the body ended %d bytes early", r.name, r.rng, ErrBadResponse, r.left)
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// Close closes the body.
func (r *exactReader) Close() error { return r.body.Close() }

// parseContentRange parses "bytes first-last/size" (size may be "*", then -1).
func parseContentRange(s string) (first, last, size int64, err error) {
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, 0, 0, fmt.Errorf("content-range %q is not a byte range", s)
	}
	rng, total, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, 0, fmt.Errorf("content-range %q has no size", s)
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, 0, fmt.Errorf("content-range %q has no range", s)
	}
	if first, err = strconv.ParseInt(a, 10, 64); err != nil {
		return 0, 0, 0, fmt.Errorf("content-range %q: %w", s, err)
	}
	if last, err = strconv.ParseInt(b, 10, 64); err != nil {
		return 0, 0, 0, fmt.Errorf("content-range %q: %w", s, err)
	}
	size = -1
	if total != "*" {
		if size, err = strconv.ParseInt(total, 10, 64); err != nil {
			return 0, 0, 0, fmt.Errorf("content-range %q: %w", s, err)
		}
		if size < 0 {
			return 0, 0, 0, fmt.Errorf("content-range %q is inconsistent", s)
		}
	}
	if first < 0 || last < first || (size >= 0 && last >= size) {
		return 0, 0, 0, fmt.Errorf("content-range %q is inconsistent", s)
	}
	return first, last, size, nil
}

// validator is the response's ETag, else its Last-Modified.
func validator(res *http.Response) string {
	if v := res.Header.Get("ETag"); v != "" {
		return v
	}
	return res.Header.Get("Last-Modified")
}
