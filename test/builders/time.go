package builders

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// T0 is "now" in tests; fixture times are relative to it.
var T0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// At is T0 shifted by d.
func At(d time.Duration) metav1.Time { return metav1.NewTime(T0.Add(d)) }

// TP is a pointer to At(d).
func TP(d time.Duration) *metav1.Time { t := At(d); return &t }
