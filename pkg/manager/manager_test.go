package manager

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestOptionsWatched folds Namespace into Namespaces; none means all.
func TestOptionsWatched(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want []string
	}{
		{"all", Options{}, nil},
		{"one by Namespace", Options{Namespace: "a"}, []string{"a"}},
		{"a list", Options{Namespaces: []string{"a", "b"}}, []string{"a", "b"}},
		{"both", Options{Namespaces: []string{"a"}, Namespace: "b"}, []string{"a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.opts.watched())
		})
	}
}
