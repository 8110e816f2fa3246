package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// metrics are the samples of one scrape of a Prometheus text endpoint:
// by metric name with its labels as written ("name{a=\"b\"}").
type metrics map[string]float64

// scrape reads a Prometheus text exposition.
func scrape(url string) (metrics, error) {
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics keeps every sample line of a text exposition.
func parseMetrics(r io.Reader) (metrics, error) {
	out := metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// sum adds the samples of a metric over all its label sets.
func (m metrics) sum(name string) float64 {
	total := 0.0
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			total += v
		}
	}
	return total
}

// bucket is one cumulative histogram bucket.
type bucket struct {
	le    float64
	count float64
}

// buckets are a histogram's cumulative buckets, in order of their bounds.
func (m metrics) buckets(name string) []bucket {
	var out []bucket
	prefix := name + `_bucket{le="`
	for k, v := range m {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		bound := strings.TrimSuffix(rest, `"}`)
		le := math.Inf(1)
		if bound != "+Inf" {
			var err error
			if le, err = strconv.ParseFloat(bound, 64); err != nil {
				continue
			}
		}
		out = append(out, bucket{le: le, count: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].le < out[j].le })
	return out
}

// leLabel finds a bucket's bound among its labels.
var leLabel = regexp.MustCompile(`[{,]le="([^"]*)"`)

// summedBuckets are a labelled histogram's cumulative buckets summed over
// its other labels (as sum by (le) does), in order of their bounds.
func (m metrics) summedBuckets(name string) []bucket {
	byBound := map[float64]float64{}
	prefix := name + "_bucket{"
	for k, v := range m {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		match := leLabel.FindStringSubmatch(k[len(name)+len("_bucket"):])
		if match == nil {
			continue
		}
		le := math.Inf(1)
		if match[1] != "+Inf" {
			var err error
			if le, err = strconv.ParseFloat(match[1], 64); err != nil {
				continue
			}
		}
		byBound[le] += v
	}
	out := make([]bucket, 0, len(byBound))
	for le, count := range byBound {
		out = append(out, bucket{le: le, count: count})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].le < out[j].le })
	return out
}

// percentile is the q-quantile of samples by the nearest rank: the
// smallest sample with at least q of them at or below it. NaN without
// samples; the samples are not reordered.
func percentile(q float64, samples []float64) float64 {
	if len(samples) == 0 {
		return math.NaN()
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// minus subtracts an earlier scrape of the same histogram.
func minus(after, before []bucket) []bucket {
	out := make([]bucket, len(after))
	for i, b := range after {
		out[i] = b
		for _, e := range before {
			if e.le == b.le {
				out[i].count -= e.count
			}
		}
	}
	return out
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linear interpolation inside the bucket that holds it; the highest
// finite bound when it falls in +Inf. NaN without observations.
func quantile(q float64, bs []bucket) float64 {
	if len(bs) == 0 || bs[len(bs)-1].count == 0 {
		return math.NaN()
	}
	rank := q * bs[len(bs)-1].count
	lower, below := 0.0, 0.0
	for i, b := range bs {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				if i > 0 {
					return bs[i-1].le
				}
				return math.NaN()
			}
			if b.count == below {
				return b.le
			}
			return lower + (b.le-lower)*(rank-below)/(b.count-below)
		}
		lower, below = b.le, b.count
	}
	return math.NaN()
}

// above counts the observations above bound, a bucket bound of the
// histogram (NaN when it is not one).
func above(bound float64, bs []bucket) float64 {
	if len(bs) == 0 {
		return math.NaN()
	}
	for _, b := range bs {
		if b.le == bound {
			return bs[len(bs)-1].count - b.count
		}
	}
	return math.NaN()
}

// procStatus reads a field in kB from /proc/<pid>/status (VmHWM, VmRSS)
// and returns it in bytes.
func procStatus(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the status of process %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("process %d: %s: %w", pid, field, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("process %d has no %s", pid, field)
}

// clockTicks is USER_HZ, the unit of /proc's CPU times on Linux.
const clockTicks = 100

// procCPU is the user and system CPU time a process used so far.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the stat of process %d: %w", pid, err)
	}
	// The command name may hold spaces: fields follow its closing paren.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("process %d: short stat line", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("process %d: unreadable CPU times", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// machineCPU is the CPU time every core of the machine spent busy (not
// idle or waiting for I/O) so far, from /proc/stat.
func machineCPU() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("reading /proc/stat: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0, fmt.Errorf("unexpected /proc/stat line %q", line)
	}
	var busy int64
	for i, f := range fields[1:] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return time.Duration(busy) * time.Second / clockTicks, nil
}

// loadAverage is the 1-minute load average.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}
