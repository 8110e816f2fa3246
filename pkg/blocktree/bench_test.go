package blocktree

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The benchmarks hash a temporary file of BLOCKTREE_BENCH_MIB MiB (1024
// by default) of random data, written once per run of the test binary
// (and in the page cache after: they measure hashing, not the disk), on
// one core (GOMAXPROCS=1) and on all of them, and report MiB/s and the
// process's CPU seconds (user + system) per GiB:
//
//	go test -run '^$' -bench . -benchtime 3x ./pkg/blocktree/
var bench struct {
	once sync.Once
	dir  string
	path string
	size int64
	err  error
}

// benchFile is the benchmarks' random file.
func benchFile(b *testing.B) (string, int64) {
	b.Helper()
	bench.once.Do(func() {
		mib := int64(1024)
		if s := os.Getenv("BLOCKTREE_BENCH_MIB"); s != "" {
			if mib, bench.err = strconv.ParseInt(s, 10, 64); bench.err != nil {
				return
			}
		}
		if bench.dir, bench.err = os.MkdirTemp("", "blocktree-bench-"); bench.err != nil {
			return
		}
		bench.path, bench.size = filepath.Join(bench.dir, "random.img"), mib<<20
		bench.err = writeRandom(bench.path, bench.size)
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.path, bench.size
}

// writeRandom writes size bytes of random data to path.
func writeRandom(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	r := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, 4<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		n := min(int64(len(buf)), size-off)
		_, _ = r.Read(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			_ = f.Close()
			return err
		}
	}
	return f.Close()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bench.dir != "" {
		_ = os.RemoveAll(bench.dir)
	}
	os.Exit(code)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs fn b.N times over size bytes and reports MiB/s and CPU
// seconds per GiB.
func measure(b *testing.B, size int64, fn func()) {
	b.SetBytes(size)
	b.ResetTimer()
	cpu0, t0 := cpuTime(), time.Now()
	for range b.N {
		fn()
	}
	cpu, wall := cpuTime()-cpu0, time.Since(t0)
	b.StopTimer()
	gib := float64(size) * float64(b.N) / (1 << 30)
	b.ReportMetric(cpu.Seconds()/gib, "cpu-s/GiB")
	b.ReportMetric(float64(size)*float64(b.N)/(1<<20)/wall.Seconds(), "MiB/s")
}

// cores runs a benchmark on one core and on all of them.
func cores(b *testing.B, fn func(b *testing.B)) {
	for _, procs := range []int{1, runtime.NumCPU()} {
		b.Run(fmt.Sprintf("cores=%d", procs), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			fn(b)
		})
	}
}

// BenchmarkCompute: Compute over the file, GOMAXPROCS workers.
func BenchmarkCompute(b *testing.B) {
	path, size := benchFile(b)
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	cores(b, func(b *testing.B) {
		measure(b, size, func() {
			if _, err := Walk(context.Background(), f, size, Options{}, func(int64, Leaf) error { return nil }); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkBuilder: the transfer's in-order hasher, the file read in 4
// MiB pieces (the default piece) and given to a Builder.
func BenchmarkBuilder(b *testing.B) {
	path, size := benchFile(b)
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4<<20)
	cores(b, func(b *testing.B) {
		measure(b, size, func() {
			bl := NewBuilder(size, Options{}, nil)
			for off := int64(0); off < size; {
				n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
				if err != nil && err != io.EOF {
					b.Fatal(err)
				}
				if err := bl.Write(buf[:n]); err != nil {
					b.Fatal(err)
				}
				off += int64(n)
			}
			if _, err := bl.Root(); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkSHA256 is the baseline: one SHA-256 of the whole file, read
// in 4 MiB pieces (what sha256sum does, and the transfer did before the
// tree).
func BenchmarkSHA256(b *testing.B) {
	path, size := benchFile(b)
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4<<20)
	measure(b, size, func() {
		h := sha256.New()
		if _, err := io.CopyBuffer(h, io.NewSectionReader(f, 0, size), buf); err != nil {
			b.Fatal(err)
		}
	})
}
