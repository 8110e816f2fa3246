// Command podprobe runs in a pod on the test node and reports what it
// sees of itself, as one JSON object written to its termination message
// (/dev/termination-log) and to stdout: its identity and confinement from
// /proc/self/status, whether the root filesystem refuses a write, whether
// the folders named by $EMPTYDIR and $VOLUME take one (and the volume's
// group and mode), the result of listing ConfigMaps through the
// `kubernetes` Service with its own token, and the answer of $HOST_URL (a
// server in the test process). It always exits 0 once it has reported;
// the test judges the report. With $KVM set it also opens /dev/kvm and
// asks its API version. It also reports its /etc/resolv.conf, the
// answers of its resolver to the comma-separated names of $LOOKUP, and
// the answer of $SERVICE_URL (a Service by name, tried again on an error
// for up to 20 seconds).
//
// With $SERVE set (an address such as :8080) it is a server instead: it
// answers every request with $ANSWER until it is killed, and reports
// nothing.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"platform.example/vm-migration/test/integration/node/probereport"
)

const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	if addr := os.Getenv("SERVE"); addr != "" {
		serve(addr, os.Getenv("ANSWER"))
		return
	}
	r := probereport.Report{Status: status()}
	r.RootWrite = tryWrite("/probe-root-write")
	r.EmptyDirWrite = tryWrite(filepath.Join(os.Getenv("EMPTYDIR"), "probe"))
	if dir := os.Getenv("VOLUME"); dir != "" {
		r.VolumeWrite = tryWrite(filepath.Join(dir, "probe"))
		if fi, err := os.Stat(dir); err == nil {
			r.VolumeGID = fi.Sys().(*syscall.Stat_t).Gid
			r.VolumeMode = fi.Mode().String()
		}
	}
	r.ConfigMaps, r.APIError = listConfigMaps()
	r.HostAnswer = get(os.Getenv("HOST_URL"))
	if os.Getenv("KVM") != "" {
		r.KVM = kvmAPIVersion()
	}
	if b, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		r.ResolvConf = string(b)
	} else {
		r.ResolvConf = err.Error()
	}
	if names := os.Getenv("LOOKUP"); names != "" {
		for _, n := range strings.Split(names, ",") {
			r.Lookups = append(r.Lookups, lookup(n))
		}
	}
	if url := os.Getenv("SERVICE_URL"); url != "" {
		r.ServiceAnswer = getRetrying(url, 20*time.Second)
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	_ = os.WriteFile("/dev/termination-log", b, 0o644)
}

// status returns the lines of /proc/self/status the test judges.
func status() map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		out["error"] = err.Error()
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		switch k {
		case "Uid", "Gid", "Groups", "CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp":
			if ok {
				out[k] = strings.Join(strings.Fields(v), " ")
			}
		}
	}
	return out
}

// tryWrite writes a file and says "ok" or the error.
func tryWrite(path string) string {
	if err := os.WriteFile(path, []byte("probe\n"), 0o644); err != nil {
		return err.Error()
	}
	return "ok"
}

// listConfigMaps lists the pod's namespace's ConfigMaps through the
// kubernetes Service, as in-cluster clients do.
func listConfigMaps() ([]string, string) {
	token, err := os.ReadFile(filepath.Join(serviceAccountDir, "token"))
	if err != nil {
		return nil, err.Error()
	}
	ns, err := os.ReadFile(filepath.Join(serviceAccountDir, "namespace"))
	if err != nil {
		return nil, err.Error()
	}
	ca, err := os.ReadFile(filepath.Join(serviceAccountDir, "ca.crt"))
	if err != nil {
		return nil, err.Error()
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	url := fmt.Sprintf("https://%s:%s/api/v1/namespaces/%s/configmaps", os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"), ns)
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := client.Do(req)
	if err != nil {
		return nil, err.Error()
	}
	defer resp.Body.Close()
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Sprintf("%s: %s", resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err.Error()
	}
	var names []string
	for _, i := range list.Items {
		names = append(names, i.Metadata.Name)
	}
	return names, ""
}

// kvmGetAPIVersion is the KVM_GET_API_VERSION ioctl, _IO(0xAE, 0x00).
const kvmGetAPIVersion = 0xAE00

// kvmAPIVersion opens /dev/kvm and asks its API version.
func kvmAPIVersion() string {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	v, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), kvmGetAPIVersion, 0)
	if errno != 0 {
		return "KVM_GET_API_VERSION: " + errno.Error()
	}
	return fmt.Sprintf("api %d", v)
}

// get returns the body of a GET, or the error.
func get(url string) string {
	if url == "" {
		return ""
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return string(b)
}

// lookup resolves name as the pod's programs do, once.
func lookup(name string) probereport.Lookup {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	l := probereport.Lookup{Name: name, Addresses: addrs, Millis: time.Since(start).Milliseconds()}
	if err != nil {
		l.Error = err.Error()
		var dnsErr *net.DNSError
		l.NotFound = errors.As(err, &dnsErr) && dnsErr.IsNotFound
	}
	return l
}

// getRetrying GETs url until it answers or limit has passed (kube-proxy
// may not have programmed a new Service yet), and returns the body or the
// last error.
func getRetrying(url string, limit time.Duration) string {
	deadline := time.Now().Add(limit)
	for {
		client := &http.Client{Timeout: 5 * time.Second}
		resp, err := client.Get(url)
		if err == nil {
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return string(b)
		}
		if time.Now().After(deadline) {
			return err.Error()
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// serve answers every request with answer, until the process is killed.
func serve(addr, answer string) {
	srv := &http.Server{
		Addr:              addr,
		ReadHeaderTimeout: 5 * time.Second,
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, answer) }),
	}
	fmt.Fprintln(os.Stderr, srv.ListenAndServe())
	os.Exit(1)
}
