package main

import (
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	k8sv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubevirt.io/kubevirt/pkg/certificates/triple/cert"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
)

// caOf names, for each CA ConfigMap, the CA Secret whose certificate it
// bundles; the external CA bundle stays empty, as virt-operator leaves it
// when no one brings certificates of their own.
var caOf = map[string]string{
	components.KubeVirtCASecretName:       components.KubeVirtCASecretName,
	components.KubeVirtExportCASecretName: components.KubeVirtExportCASecretName,
	components.KubeVirtBackupCASecretName: components.KubeVirtBackupCASecretName,
}

// writeCertificates writes to dir what virt-operator creates before it
// starts KubeVirt's components, for namespace: the three CA Secrets, every
// component's certificate Secret signed by kubevirt-ca (with the DNS names
// KubeVirt's own population strategies give them), and the CA bundle
// ConfigMaps virt-api and virt-handler read, each valid for duration. It
// is run at install time, never at build time: the keys stay out of the
// build cache.
func writeCertificates(dir, namespace string, duration time.Duration) error {
	d := &metav1.Duration{Duration: duration}
	cas := map[string]*tls.Certificate{}
	var secrets []*k8sv1.Secret
	for _, s := range components.NewCACertSecrets(namespace) {
		if err := components.PopulateSecretWithCertificate(s, nil, d); err != nil {
			return fmt.Errorf("creating the CA %s: %w", s.Name, err)
		}
		crt, err := components.LoadCertificates(s)
		if err != nil {
			return fmt.Errorf("reading back the CA %s: %w", s.Name, err)
		}
		cas[s.Name] = crt
		secrets = append(secrets, s)
	}
	ca := cas[components.KubeVirtCASecretName]
	for _, s := range components.NewCertSecrets(namespace, namespace) {
		if err := components.PopulateSecretWithCertificate(s, ca, d); err != nil {
			return fmt.Errorf("creating the certificate %s: %w", s.Name, err)
		}
		secrets = append(secrets, s)
	}
	var objs []any
	for _, s := range secrets {
		objs = append(objs, s)
	}
	for _, cm := range components.NewCAConfigMaps(namespace) {
		cm.Data = map[string]string{components.CABundleKey: ""}
		if from, ok := caOf[cm.Name]; ok {
			// A first bundle holds the current CA alone (what
			// components.MergeCABundle makes of an empty one).
			cm.Data[components.CABundleKey] = string(cert.EncodeCertPEM(cas[from].Leaf))
		}
		objs = append(objs, cm)
	}
	for i, o := range objs {
		var kind, name string
		switch v := o.(type) {
		case *k8sv1.Secret:
			kind, name = "secret", v.Name
		case *k8sv1.ConfigMap:
			kind, name = "configmap", v.Name
		}
		// Private keys: readable by the installer alone.
		if err := writeMode(filepath.Join(dir, fmt.Sprintf("%02d-%s-%s.yaml", i, kind, strings.ToLower(name))), o, 0o600); err != nil {
			return err
		}
	}
	return nil
}
