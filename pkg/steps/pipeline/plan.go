package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/naming"
	"platform.example/vm-migration/pkg/statemachine"
)

// RenderPlan renders every object m would create on its way to success, in
// creation order, with the very functions the migration's own creates use
// (from the status statemachine.PlannedStatus says it would have then):
// staging claims; the transfer's progress access (with the progress
// channel on), job spec ConfigMap and Job; the conversion's domain
// ConfigMap and Job (unless skipped); the DataVolumes; the verification
// Job; the VirtualMachine. The Jobs attach the claims in the volume
// modes plannedBlockClaims gives them.
func RenderPlan(m *v1alpha1.VirtualMachineMigration, cfg Config) ([]runtime.Object, error) {
	mp := m.DeepCopy()
	mp.Status = statemachine.PlannedStatus(m)
	var objs []runtime.Object
	add := func(more ...runtime.Object) { objs = append(objs, more...) }
	claims, err := RenderStagingClaims(mp, ClaimDefaults{})
	if err != nil {
		return nil, fmt.Errorf("planning the staging volumes: %w", err)
	}
	for _, c := range claims {
		add(c)
	}
	block := plannedBlockClaims(mp, claims)
	if err := planTransfer(mp, cfg, block, add); err != nil {
		return nil, err
	}
	if !mp.SpecInForce().Conversion.Skip {
		cm, err := RenderConversionConfigMap(mp, 1, block)
		if err != nil {
			return nil, fmt.Errorf("planning the conversion domain: %w", err)
		}
		job, err := RenderConversionJob(mp, 1, cfg, block)
		if err != nil {
			return nil, fmt.Errorf("planning the conversion job: %w", err)
		}
		add(cm, job)
	}
	return planTarget(mp, cfg, objs, claims)
}

// plannedBlockClaims names the claims a plan attaches as devices: those
// the storage mapping puts in Block volume mode (mappedBlockClaims), but
// a claim the plan renders (claims) in the mode it has.
func plannedBlockClaims(mp *v1alpha1.VirtualMachineMigration, claims []*corev1.PersistentVolumeClaim) map[string]bool {
	block := mappedBlockClaims(mp)
	for _, c := range claims {
		block[c.Name] = c.Spec.VolumeMode != nil && *c.Spec.VolumeMode == corev1.PersistentVolumeBlock
	}
	return block
}

// planTransfer adds the first transfer attempt's objects, the claims
// blockClaims names attached as devices.
func planTransfer(mp *v1alpha1.VirtualMachineMigration, cfg Config, blockClaims map[string]bool, add func(...runtime.Object)) error {
	if cfg.TransferProgress {
		a, err := renderAccess(mp, 1, cfg)
		if err != nil {
			return fmt.Errorf("planning the transfer progress access: %w", err)
		}
		add(a.ConfigMap, a.ServiceAccount, a.Role, a.RoleBinding)
	}
	cm, err := RenderTransferConfigMap(mp, 1, blockClaims)
	if err != nil {
		return fmt.Errorf("planning the transfer job spec: %w", err)
	}
	job, err := RenderTransferJob(mp, 1, cfg, blockClaims)
	if err != nil {
		return fmt.Errorf("planning the transfer job: %w", err)
	}
	add(cm, job)
	return nil
}

// planTarget adds the DataVolumes, the verification Job where the run
// would make one (as it reads the target disks when the conversion
// reported every converted checksum, in the volume modes the storage
// mapping asks for) and the VirtualMachine. Disks written in place need
// no read when the conversion hashes each of them: file disks, at most
// maxConvertedChecksums of them (a pause or a late start may still owe
// one, which no plan foresees).
func planTarget(mp *v1alpha1.VirtualMachineMigration, cfg Config, objs []runtime.Object, claims []*corev1.PersistentVolumeClaim) ([]runtime.Object, error) {
	dvs, err := RenderDataVolumes(mp, claims)
	if err != nil {
		return nil, fmt.Errorf("planning the data volumes: %w", err)
	}
	for _, dv := range dvs {
		objs = append(objs, dv)
	}
	vp := mp.DeepCopy()
	block := map[string]bool{}
	for i, d := range vp.Status.Disks {
		vp.Status.Disks[i].Checksums = &v1alpha1.DiskChecksums{Converted: "planned"}
		if dv := dvs[i].Spec.Storage; dv != nil && dv.VolumeMode != nil {
			block[d.DataVolume] = *dv.VolumeMode == corev1.PersistentVolumeBlock
		}
	}
	if plannedRead(mp, block) {
		verify, err := RenderVerificationJob(vp, 1, cfg, block)
		if err != nil {
			return nil, fmt.Errorf("planning the verification job: %w", err)
		}
		objs = append(objs, verify)
	}
	vm, err := RenderVirtualMachine(mp)
	if err != nil {
		return nil, fmt.Errorf("planning the virtual machine: %w", err)
	}
	return append(objs, vm), nil
}

// plannedRead reports whether the run would read the target disks back
// with a verification Job: a disk imported by a clone, a Block disk (the
// conversion hashes files only), or more disks than the conversion hashes.
func plannedRead(mp *v1alpha1.VirtualMachineMigration, block map[string]bool) bool {
	if len(mp.Status.Disks) > maxConvertedChecksums {
		return true
	}
	for _, d := range mp.Status.Disks {
		if !d.WrittenInPlace() || block[d.DataVolume] {
			return true
		}
	}
	return false
}

// RenderPlanConfigMap renders the ConfigMap that stores m's plan: every
// object as a multi-document YAML (objects.yaml), the conversion's domain
// XML (domain.xml) and the list of the objects (index.json).
func RenderPlanConfigMap(m *v1alpha1.VirtualMachineMigration, cfg Config) (*corev1.ConfigMap, error) {
	objs, err := RenderPlan(m, cfg)
	if err != nil {
		return nil, err
	}
	var docs bytes.Buffer
	var index []v1alpha1.PlannedObject
	for i, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("encoding the plan: %w", err)
		}
		if i > 0 {
			docs.WriteString("---\n")
		}
		docs.Write(data)
		index = append(index, plannedObject(o))
	}
	idx, err := json.Marshal(index)
	if err != nil {
		return nil, fmt.Errorf("encoding the plan's index: %w", err)
	}
	data := map[string]string{v1alpha1.PlanKeyObjects: docs.String(), v1alpha1.PlanKeyIndex: string(idx)}
	if !m.SpecInForce().Conversion.Skip {
		mp := m.DeepCopy()
		mp.Status = statemachine.PlannedStatus(m)
		claims, err := RenderStagingClaims(mp, ClaimDefaults{})
		if err != nil {
			return nil, fmt.Errorf("planning the staging volumes: %w", err)
		}
		domain, err := RenderDomainXML(mp, plannedBlockClaims(mp, claims))
		if err != nil {
			return nil, fmt.Errorf("planning the conversion domain: %w", err)
		}
		data[v1alpha1.PlanKeyDomain] = string(domain)
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: childMeta(m, naming.PlanConfigMap(m.Name), v1alpha1.ComponentPlan, true),
		Data:       data,
	}, nil
}

// plannedObject names a rendered object.
func plannedObject(o runtime.Object) v1alpha1.PlannedObject {
	gvk := o.GetObjectKind().GroupVersionKind()
	name := ""
	if acc, ok := o.(interface{ GetName() string }); ok {
		name = acc.GetName()
	}
	return v1alpha1.PlannedObject{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: name}
}

// CreatePlan stores m's plan in its ConfigMap.
func (s *Step) CreatePlan(ctx context.Context, m *v1alpha1.VirtualMachineMigration) error {
	cm, err := RenderPlanConfigMap(m, s.Config)
	if err != nil {
		return fmt.Errorf("rendering the plan: %w", err)
	}
	return createIfAbsent(ctx, m, "config map", s.Kube.CoreV1().ConfigMaps(m.Namespace), cm)
}

// observePlan reads m's stored plan from the cache.
func (s *Step) observePlan(m *v1alpha1.VirtualMachineMigration) *statemachine.PlanObservation {
	cm, err := s.Listers.ConfigMaps.ConfigMaps(m.Namespace).Get(naming.PlanConfigMap(m.Name))
	if err != nil || !ours(cm, m.UID) || cm.DeletionTimestamp != nil {
		return nil
	}
	var objs []v1alpha1.PlannedObject
	// A plan whose index cannot be read still counts as stored.
	_ = json.Unmarshal([]byte(cm.Data[v1alpha1.PlanKeyIndex]), &objs)
	return &statemachine.PlanObservation{Ref: refTo(statemachine.KindConfigMap, cm), RenderedAt: cm.CreationTimestamp, Objects: objs}
}
