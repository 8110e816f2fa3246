package standins

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// goodVM is a VM the webhook admits: EFI secure boot with SMM, two disks on
// DataVolumes, one pod and one Multus interface.
func goodVM() *kubevirtv1.VirtualMachine {
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "web-01", Namespace: "apps"},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: ptr.To(kubevirtv1.RunStrategyHalted),
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
				Domain: kubevirtv1.DomainSpec{
					Memory:   &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("2Gi"))},
					Firmware: &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{EFI: &kubevirtv1.EFI{SecureBoot: ptr.To(true)}}},
					Features: &kubevirtv1.Features{SMM: &kubevirtv1.FeatureState{Enabled: ptr.To(true)}},
					Devices: kubevirtv1.Devices{
						Disks: []kubevirtv1.Disk{
							{Name: "disk-0", BootOrder: ptr.To[uint](1), DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
							{Name: "disk-1", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSATA}}},
						},
						Interfaces: []kubevirtv1.Interface{
							{Name: "net-0", Model: "virtio", MacAddress: "00:50:56:aa:bb:01", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}},
							{Name: "net-1", Model: "virtio", MacAddress: "00:50:56:aa:bb:02", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}},
						},
					},
				},
				Networks: []kubevirtv1.Network{
					{Name: "net-0", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}},
					{Name: "net-1", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "default/backend"}}},
				},
				Volumes: []kubevirtv1.Volume{
					{Name: "disk-0", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "web-01-disk-0"}}},
					{Name: "disk-1", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "web-01-disk-1"}}},
				},
			}},
		},
	}
}

func TestVirtualMachineRules(t *testing.T) {
	dom := func(vm *kubevirtv1.VirtualMachine) *kubevirtv1.DomainSpec { return &vm.Spec.Template.Spec.Domain }
	tests := []struct {
		name   string
		mutate func(*kubevirtv1.VirtualMachine)
		want   []string // cause messages, in order; none: admitted
	}{
		{"good", func(*kubevirtv1.VirtualMachine) {}, nil},
		{"secure boot off needs no SMM", func(vm *kubevirtv1.VirtualMachine) {
			dom(vm).Firmware.Bootloader.EFI.SecureBoot = ptr.To(false)
			dom(vm).Features = nil
		}, nil},
		{"BIOS needs no SMM", func(vm *kubevirtv1.VirtualMachine) {
			dom(vm).Firmware.Bootloader = &kubevirtv1.Bootloader{BIOS: &kubevirtv1.BIOS{}}
			dom(vm).Features = nil
		}, nil},
		{"SMM feature with no enabled field is on", func(vm *kubevirtv1.VirtualMachine) { dom(vm).Features.SMM.Enabled = nil }, nil},
		{"secure boot defaulted on without SMM", func(vm *kubevirtv1.VirtualMachine) {
			dom(vm).Firmware.Bootloader.EFI.SecureBoot = nil
			dom(vm).Features = nil
		}, []string{"spec.template.spec.domain has EFI SecureBoot enabled. SecureBoot requires SMM, which is currently disabled."}},
		{"both bootloaders", func(vm *kubevirtv1.VirtualMachine) { dom(vm).Firmware.Bootloader.BIOS = &kubevirtv1.BIOS{} },
			[]string{"spec.template.spec.domain.firmware.bootloader has both EFI and BIOS configured, but they are mutually exclusive."}},
		{"no template", func(vm *kubevirtv1.VirtualMachine) { vm.Spec.Template = nil }, []string{"missing virtual machine template."}},
		{"no run strategy", func(vm *kubevirtv1.VirtualMachine) { vm.Spec.RunStrategy = nil }, []string{"RunStrategy must be specified"}},
		{"running alone is accepted", func(vm *kubevirtv1.VirtualMachine) {
			vm.Spec.RunStrategy = nil
			vm.Spec.Running = ptr.To(true)
		}, nil},
		{"WaitAsReceiver without its gate", func(vm *kubevirtv1.VirtualMachine) {
			vm.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyWaitAsReceiver)
		},
			[]string{"Invalid RunStrategy (WaitAsReceiver), DecentralizedLiveMigration feature gate is not enabled in kubevirt resource"}},
		{"network of no kind", func(vm *kubevirtv1.VirtualMachine) { vm.Spec.Template.Spec.Networks[1].Multus = nil },
			[]string{"should have a network type"}},
		{"Multus without a name", func(vm *kubevirtv1.VirtualMachine) { vm.Spec.Template.Spec.Networks[1].Multus.NetworkName = "" },
			[]string{"CNI delegating plugin must have a networkName"}},
		{"two bindings", func(vm *kubevirtv1.VirtualMachine) {
			dom(vm).Devices.Interfaces[1].Masquerade = &kubevirtv1.InterfaceMasquerade{}
		},
			[]string{"logical net-1 interface must have exactly one binding method or binding plugin", "Masquerade interface only implemented with pod network"}},
		{"reserved MAC on masquerade", func(vm *kubevirtv1.VirtualMachine) { dom(vm).Devices.Interfaces[0].MacAddress = "02:00:00:00:00:00" },
			[]string{"The requested MAC address is reserved for the in-pod bridge. Please choose another one."}},
		{"network without interface", func(vm *kubevirtv1.VirtualMachine) { dom(vm).Devices.Interfaces = dom(vm).Devices.Interfaces[:1] },
			[]string{"spec.template.spec.networks[1].name 'net-1' not found."}},
		{"duplicate network", func(vm *kubevirtv1.VirtualMachine) { vm.Spec.Template.Spec.Networks[1].Name = "net-0" },
			// The last network of a name wins KubeVirt's index, as here.
			[]string{"Masquerade interface only implemented with pod network",
				`Network with name "net-0" already exists, every network must have a unique name`,
				"spec.template.spec.domain.devices.interfaces[1].name 'net-1' not found."}},
		{"bad interface name and model", func(vm *kubevirtv1.VirtualMachine) {
			vm.Spec.Template.Spec.Networks[1].Name = "net 1"
			dom(vm).Devices.Interfaces[1].Name = "net 1"
			dom(vm).Devices.Interfaces[1].Model = "vmxnet3"
		}, []string{
			"Network interface name can only contain alphabetical characters, numbers, dashes (-) or underscores (_)",
			"interface spec.template.spec.domain.devices.interfaces[1].name uses model vmxnet3 that is not supported.",
		}},
		{"EUI-64 MAC is too long", func(vm *kubevirtv1.VirtualMachine) {
			dom(vm).Devices.Interfaces[1].MacAddress = "00:50:56:aa:bb:cc:dd:ee"
		},
			[]string{"interface spec.template.spec.domain.devices.interfaces[1].name has too long MAC address (00:50:56:aa:bb:cc:dd:ee)."}},
		{"interface boot order 0", func(vm *kubevirtv1.VirtualMachine) { dom(vm).Devices.Interfaces[0].BootOrder = ptr.To[uint](0) },
			[]string{"spec.template.spec[0] must have a boot order > 0, if supplied"}},
		{"disk boot order twice", func(vm *kubevirtv1.VirtualMachine) { dom(vm).Devices.Disks[1].BootOrder = ptr.To[uint](1) },
			[]string{"Boot order for spec.template.spec.domain.devices.disks[1].bootOrder already set for a different device."}},
		{"same disk name", func(vm *kubevirtv1.VirtualMachine) { dom(vm).Devices.Disks[1].Name = "disk-0" },
			[]string{"spec.template.spec.domain.devices.disks[1] and spec.template.spec.domain.devices.disks[0] must not have the same Name."}},
		{"two targets", func(vm *kubevirtv1.VirtualMachine) { dom(vm).Devices.Disks[1].CDRom = &kubevirtv1.CDRomTarget{} },
			[]string{"spec.template.spec.domain.devices.disks[1] can only have a single target type defined"}},
		{"unknown bus", func(vm *kubevirtv1.VirtualMachine) { dom(vm).Devices.Disks[1].Disk.Bus = "nvme" },
			[]string{"spec.template.spec.domain.devices.disks[1] is set with an unrecognized bus nvme, must be one of: [virtio scsi sata usb]"}},
		{"read-only SATA disk", func(vm *kubevirtv1.VirtualMachine) { dom(vm).Devices.Disks[1].Disk.ReadOnly = true },
			[]string{"sata hard-disks do not support read-only."}},
		{"CD-ROM on virtio", func(vm *kubevirtv1.VirtualMachine) {
			dom(vm).Devices.Disks[1].DiskDevice = kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{Bus: kubevirtv1.DiskBusVirtio}}
		}, []string{"Bus type virtio is invalid for CD-ROM device"}},
		{"serial with a space", func(vm *kubevirtv1.VirtualMachine) { dom(vm).Devices.Disks[0].Serial = "VMware disk" },
			[]string{"spec.template.spec.domain.devices.disks[0] must be made up of the following characters [A-Za-z0-9_.+-], if specified"}},
		{"serial too long", func(vm *kubevirtv1.VirtualMachine) { dom(vm).Devices.Disks[0].Serial = strings.Repeat("a", 257) },
			[]string{"spec.template.spec.domain.devices.disks[0] must be less than or equal to 256 in length, if specified"}},
		{"guest above the limit", func(vm *kubevirtv1.VirtualMachine) {
			dom(vm).Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}, []string{"spec.template.spec.domain.memory.guest '2Gi' must be equal to or less than the memory limit spec.template.spec.domain.resources.limits.memory '1Gi'"}},
		{"q35 machine", func(vm *kubevirtv1.VirtualMachine) { dom(vm).Machine = &kubevirtv1.Machine{Type: "pc-q35-rhel9.4.0"} }, nil},
		{"template without volume use", func(vm *kubevirtv1.VirtualMachine) {
			vm.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{{
				ObjectMeta: metav1.ObjectMeta{Name: "unused"},
				Spec:       cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}, Storage: &cdiv1.StorageSpec{}},
			}}
		}, []string{"DataVolumeTemplate entry spec.dataVolumeTemplate[0] must be referenced in the VMI template's 'volumes' list"}},
		{"template with two sources", func(vm *kubevirtv1.VirtualMachine) {
			vm.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{{
				ObjectMeta: metav1.ObjectMeta{Name: "web-01-disk-0"},
				Spec: cdiv1.DataVolumeSpec{Storage: &cdiv1.StorageSpec{}, Source: &cdiv1.DataVolumeSource{
					Blank: &cdiv1.DataVolumeBlankImage{}, PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "apps", Name: "x"}}},
			}}
		}, []string{"Multiple dataVolume sources"}},
		{"template without target", func(vm *kubevirtv1.VirtualMachine) {
			vm.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "web-01-disk-0"}}}
		}, []string{"Missing Data volume PVC or Storage"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vm := goodVM()
			tc.mutate(vm)
			got := messages(validateVirtualMachineSpec(field.NewPath("spec"), &vm.Spec))
			assert.Equal(t, tc.want, got, "the causes KubeVirt's webhook gives, in order (none: admitted)")
		})
	}
}

func TestVirtualMachineInstanceRules(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*kubevirtv1.VirtualMachineInstanceSpec)
		want   []string
	}{
		{"good", func(*kubevirtv1.VirtualMachineInstanceSpec) {}, nil},
		{"no memory", func(s *kubevirtv1.VirtualMachineInstanceSpec) { s.Domain.Memory = nil },
			[]string{"no memory requested, at least one of 'spec.domain.memory.guest', 'spec.domain.memory.hugepages.pageSize' or 'spec.domain.resources.requests.memory' must be set"}},
		{"memory request is enough", func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Memory = nil
			s.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}, nil},
		{"volume without disk", func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Volumes = append(s.Volumes, kubevirtv1.Volume{Name: "extra", VolumeSource: kubevirtv1.VolumeSource{
				PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{}}})
		}, []string{"spec.domain.volumes[2].name 'extra' not found."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "web-01", Namespace: "apps"}, Spec: goodVM().Spec.Template.Spec}
			tc.mutate(&vmi.Spec)
			resp := (&Admission{}).admitVirtualMachineInstance(context.Background(), request(t, virtualMachineInstanceResource, vmi))
			var got []string
			if !resp.Allowed {
				got = messages(resp.Result.Details.Causes)
			}
			assert.Equal(t, tc.want, got, "the causes KubeVirt's webhook gives, in order (none: admitted)")
		})
	}
}

func TestDataVolumeRules(t *testing.T) {
	size := func(q string) corev1.VolumeResourceRequirements {
		return corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}}
	}
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	tests := []struct {
		name   string
		mutate func(*cdiv1.DataVolumeSpec)
		want   string // the one cause; empty: admitted
	}{
		{"clone into storage without size", func(*cdiv1.DataVolumeSpec) {}, ""},
		{"clone into pvc with size", func(s *cdiv1.DataVolumeSpec) {
			s.Storage, s.PVC = nil, &corev1.PersistentVolumeClaimSpec{AccessModes: rwo, Resources: size("1Gi")}
		}, ""},
		{"clone into pvc without size", func(s *cdiv1.DataVolumeSpec) {
			s.Storage, s.PVC = nil, &corev1.PersistentVolumeClaimSpec{AccessModes: rwo}
		}, "PVC size is missing"},
		{"pvc without access mode", func(s *cdiv1.DataVolumeSpec) {
			s.Storage, s.PVC = nil, &corev1.PersistentVolumeClaimSpec{Resources: size("1Gi")}
		}, "Required value: at least 1 access mode is required"},
		{"pvc with two access modes", func(s *cdiv1.DataVolumeSpec) {
			s.Storage, s.PVC = nil, &corev1.PersistentVolumeClaimSpec{AccessModes: append(rwo, corev1.ReadOnlyMany), Resources: size("1Gi")}
		}, "PVC multiple accessModes"},
		{"storage with unknown access mode", func(s *cdiv1.DataVolumeSpec) {
			s.Storage.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadSometimes"}
		},
			`Unsupported value: "ReadSometimes": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"`},
		{"blank without size", func(s *cdiv1.DataVolumeSpec) {
			s.Source = &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}
		}, "Storage size is missing"},
		{"zero size", func(s *cdiv1.DataVolumeSpec) { s.Storage.Resources = size("0") }, "Storage size can't be equal or less than zero"},
		{"source and sourceRef", func(s *cdiv1.DataVolumeSpec) {
			s.SourceRef = &cdiv1.DataVolumeSourceRef{Kind: cdiv1.DataVolumeDataSource, Name: "golden"}
		}, "Data volume should have either Source or SourceRef, or be externally populated"},
		{"sourceRef of another kind", func(s *cdiv1.DataVolumeSpec) {
			s.Source, s.SourceRef = nil, &cdiv1.DataVolumeSourceRef{Kind: "PersistentVolumeClaim", Name: "golden"}
		}, "Unsupported sourceRef kind PersistentVolumeClaim, currently only DataSource is supported"},
		{"empty source", func(s *cdiv1.DataVolumeSpec) {
			s.Source, s.Storage.Resources = &cdiv1.DataVolumeSource{}, size("1Gi")
		}, "Missing Data volume source"},
		{"unknown content type", func(s *cdiv1.DataVolumeSpec) { s.ContentType = "iso" }, "ContentType not one of: kubevirt, archive"},
		{"external population with a source", func(s *cdiv1.DataVolumeSpec) {
			s.Storage.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "x"}
		}, "External population is incompatible with Source and SourceRef"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := cdiv1.DataVolumeSpec{
				Source:  &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "apps", Name: "staging"}},
				Storage: &cdiv1.StorageSpec{StorageClassName: ptr.To("standard")},
			}
			tc.mutate(&spec)
			got := strings.Join(messages(validateDataVolumeSpec(field.NewPath("spec"), &spec)), "\n")
			assert.Equal(t, tc.want, got, "the cause CDI's webhook gives (none: admitted)")
		})
	}
}

func TestCloneTokens(t *testing.T) {
	a, err := newCloneTokens()
	require.NoError(t, err, "making a clone token key")
	b, err := newCloneTokens()
	require.NoError(t, err, "making another clone token key")
	p := cloneTokenPayload{SourceNamespace: "src", SourceName: "staging", TargetNamespace: "dst", TargetName: "disk-0"}
	tok, err := a.sign(p)
	require.NoError(t, err, "signing a clone token")
	assert.NoError(t, a.verify(tok, p), "a key accepts its own token")
	other := p
	other.TargetName = "disk-1"
	for name, check := range map[string]error{
		"another target":  a.verify(tok, other),
		"another key":     b.verify(tok, p),
		"tampered":        a.verify(strings.Replace(tok, tok[:4], "eyJ4", 1), p),
		"not a token":     a.verify("garbage", p),
		"empty signature": a.verify(strings.Split(tok, ".")[0]+".", p),
	} {
		assert.Error(t, check, "%s: the clone token must be refused", name)
	}
}

// TestResponses checks the shape of KubeVirt's and CDI's refusals and the
// HTTP round trip of a review.
func TestResponses(t *testing.T) {
	causes := make([]metav1.StatusCause, 12)
	for i := range causes {
		causes[i] = metav1.StatusCause{Message: string(rune('a' + i))}
	}
	assert.Equal(t, "a, b, c, d, e, f, g, h, i, j, and 2 more validation errors", kubevirtDenied(causes).Result.Message,
		"KubeVirt names ten causes and counts the rest")
	cdi := cdiDenied(causes[:2]).Result
	assert.Equal(t, " a b", cdi.Message, "CDI's refusal message")
	assert.Equal(t, int32(http.StatusUnprocessableEntity), cdi.Code, "CDI's refusal code")

	vm := goodVM()
	vm.Spec.RunStrategy = nil
	srv := httptest.NewServer(admissionHandler((&Admission{}).admitVirtualMachine))
	defer srv.Close()
	review := admissionv1.AdmissionReview{Request: request(t, virtualMachineResource, vm)}
	body, err := json.Marshal(review)
	require.NoError(t, err, "encoding the review")
	resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(body))
	require.NoError(t, err, "posting the review")
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out), "decoding the reply")
	assert.Equal(t, "AdmissionReview", out.Kind, "the reply is an AdmissionReview")
	require.NotNil(t, out.Response, "the reply has a response")
	assert.Equal(t, review.Request.UID, out.Response.UID, "the response answers the request")
	assert.False(t, out.Response.Allowed, "a VM without a run strategy is refused")
	require.NotNil(t, out.Response.Result, "the refusal says why")
	assert.Equal(t, "RunStrategy must be specified", out.Response.Result.Message, "the refusal says why")
	bad, err := http.Post(srv.URL, "application/json", strings.NewReader("{}"))
	require.NoError(t, err, "posting a review without a request")
	bad.Body.Close()
	assert.Equal(t, http.StatusBadRequest, bad.StatusCode, "a review without a request is a bad request")
	_, _, err = webhookCertificate()
	assert.NoError(t, err, "making the webhook's certificate")
}

// request is a create request for obj.
func request(t *testing.T, gvr metav1.GroupVersionResource, obj runtime.Object) *admissionv1.AdmissionRequest {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err, "encoding the object under review")
	return &admissionv1.AdmissionRequest{UID: "review-1", Resource: gvr, Operation: admissionv1.Create, Namespace: "apps", Object: runtime.RawExtension{Raw: raw}}
}

func messages(causes []metav1.StatusCause) []string {
	var out []string
	for _, c := range causes {
		out = append(out, c.Message)
	}
	return out
}
