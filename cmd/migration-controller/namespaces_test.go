package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNamespaceFlags parses --namespaces and its alias --namespace into
// one list.
func TestNamespaceFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []string
		wantErr string
	}{
		{name: "none: all namespaces", args: nil, want: nil},
		{name: "a list", args: []string{"--namespaces=team-a,team-b"}, want: []string{"team-a", "team-b"}},
		{name: "spaces and empty entries", args: []string{"--namespaces", " team-a, ,team-b,"}, want: []string{"team-a", "team-b"}},
		{name: "the alias", args: []string{"--namespace=team-a"}, want: []string{"team-a"}},
		{name: "both, and repeated", args: []string{"--namespace=team-c", "--namespaces=team-a", "--namespaces=team-b"},
			want: []string{"team-c", "team-a", "team-b"}},
		{name: "not a namespace name", args: []string{"--namespaces=team-a,Team_B"}, wantErr: `"Team_B" is not a namespace name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseFlags(tc.args)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, f.opts.Namespaces)
		})
	}
}
