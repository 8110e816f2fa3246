package wire

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
)

// CommandName is the transfer command's name.
const CommandName = "vm-transfer"

// VersionInfo is what `vm-transfer --version` prints, as one JSON line
// (and writes as its termination message): the image proof pod reads it
// to tell that the image holds a transfer command that reads the job
// specs this controller writes.
type VersionInfo struct {
	// Command is CommandName.
	Command string `json:"command"`
	// Version is the module version the command was built from ("(devel)"
	// for a build from a working tree).
	Version string `json:"version"`
	// Revision is the VCS revision it was built from, when known.
	Revision string `json:"revision,omitempty"`
	// GoVersion is the Go toolchain that built it.
	GoVersion string `json:"goVersion"`
	// SpecVersion is the job spec format it reads (SpecVersion).
	SpecVersion string `json:"specVersion"`
}

// BuildVersion is the VersionInfo of the running binary.
func BuildVersion() VersionInfo {
	v := VersionInfo{Command: CommandName, Version: "unknown", SpecVersion: SpecVersion}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Version, v.GoVersion = bi.Main.Version, bi.GoVersion
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v.Revision = s.Value
			}
		}
	}
	return v
}

// ParseVersion reads a transfer command's --version output: its last line
// that is a JSON object.
func ParseVersion(out string) (VersionInfo, error) {
	var v VersionInfo
	line := LastJSONLine(out)
	if line == "" {
		return v, fmt.Errorf("no version line in %q", out)
	}
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		return v, fmt.Errorf("reading the version line %q: %w", line, err)
	}
	if v.Command != CommandName {
		return v, fmt.Errorf("the version line names command %q, want %s", v.Command, CommandName)
	}
	return v, nil
}

// LastJSONLine is the last line of out that looks like a JSON object (a
// self-check's report after whatever else it printed), "" for none.
func LastJSONLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if line := strings.TrimSpace(lines[i]); strings.HasPrefix(line, "{") {
			return line
		}
	}
	return ""
}
