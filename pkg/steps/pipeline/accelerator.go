package pipeline

import (
	"strconv"
	"strings"
)

// How the conversion chooses between KVM and TCG for libguestfs' helper VM.
const (
	// AcceleratorScriptKey holds, in the conversion ConfigMap, the script
	// convert.sh sources first: it picks the accelerator and says which.
	AcceleratorScriptKey = "accelerator.sh"
	// KVMEnv tells the accelerator script whether the pod was offered
	// /dev/kvm: KVMProbe (Config.ConversionRuntimeClass or
	// Config.ConversionKVM) or KVMOff.
	KVMEnv = "VM_MIGRATION_KVM"
	// KVMProbe: use KVM if the appliance boots under it.
	KVMProbe = "probe"
	// KVMOff: TCG, without looking at /dev/kvm.
	KVMOff = "off"
	// kvmProbeSeconds bounds the KVM probe: the appliance boots under a
	// working KVM in seconds; a KVM that hangs costs this much once.
	kvmProbeSeconds = 60
	kvmDevice       = "/dev/kvm"
)

// acceleratorScriptTemplate is the accelerator script (@KVM@ and @PROBE@
// stand for the KVM device and the probe's bound in seconds). It exports
// LIBGUESTFS_BACKEND_SETTINGS as force_kvm or force_tcg, never leaving the
// choice to libguestfs (which falls back to TCG silently), and prints one
// line "conversion accelerator: kvm|tcg (why)" to the container log.
//
// TCG unless KVM was offered and a probe succeeds: the probe boots
// libguestfs' appliance (the helper VM the conversion runs, a real Linux
// kernel and its daemon) once under KVM. A /dev/kvm that opens is not
// enough: on nested or paravirtual KVM (the machines this project is
// tested on), QEMU aborts with -cpu host ("failed to set MSR 0x10a"),
// hangs after loading a guest's kernel, or the appliance aborts, while TCG
// converts the same guest; a conversion that fails halfway costs a whole
// attempt, the probe at most kvmProbeSeconds.
const acceleratorScriptTemplate = `# Rendered by the VM migration controller; convert.sh sources it. Picks
# the accelerator of libguestfs' helper VM: KVM only when the pod was
# offered /dev/kvm (` + KVMEnv + `=` + KVMProbe + `) and the appliance boots under it.
accel=tcg
why="KVM not offered to the pod (the controller's --conversion-runtime-class and --conversion-kvm are unset)"
if [ "${` + KVMEnv + `:-` + KVMOff + `}" = ` + KVMProbe + ` ]; then
  if [ ! -e @KVM@ ]; then
    why="KVM offered, but the pod has no @KVM@"
  elif [ ! -r @KVM@ ] || [ ! -w @KVM@ ]; then
    why="KVM offered, but @KVM@ is not read-writable by uid $(id -u) (groups $(id -G | tr ' ' ,))"
  elif ! command -v guestfish >/dev/null 2>&1; then
    why="KVM offered, but the image has no guestfish to probe it"
  else
    probe_start=$(date +%s)
    probe_log=$(mktemp)
    trap 'trap - TERM INT; kill -KILL 0' TERM INT
    LIBGUESTFS_BACKEND_SETTINGS=force_kvm timeout @PROBE@ guestfish -v --ro -a /dev/null run >"$probe_log" 2>&1
    probe_rc=$?
    trap - TERM INT
    probe_seconds=$(($(date +%s) - probe_start))
    if [ "$probe_rc" -eq 0 ]; then
      accel=kvm
      why="the appliance booted under KVM in ${probe_seconds}s"
    elif [ "$probe_rc" -eq 124 ]; then
      why="the KVM probe did not boot the appliance within @PROBE@s"
    else
      # qemu's own errors and libguestfs', without the advice around them.
      cause=$(grep -E '^qemu-system[^:]*: |libguestfs: error: ' "$probe_log" | head -n 3 |
        sed 's/^.*libguestfs: error: //' | tr '\n' ' ' | sed 's/ *$//')
      why="the KVM probe failed after ${probe_seconds}s (exit $probe_rc): $cause"
    fi
    rm -f "$probe_log"
  fi
fi
export LIBGUESTFS_BACKEND_SETTINGS=force_$accel
echo "conversion accelerator: $accel ($why)"
`

// acceleratorScript is acceleratorScriptTemplate for the pod.
var acceleratorScript = strings.NewReplacer(
	"@KVM@", kvmDevice,
	"@PROBE@", strconv.Itoa(kvmProbeSeconds),
).Replace(acceleratorScriptTemplate)

// kvmOffered is whether the conversion pod is offered /dev/kvm.
func kvmOffered(cfg Config) bool {
	return cfg.ConversionKVM || cfg.ConversionRuntimeClass != ""
}
