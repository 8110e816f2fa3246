package localpath

import (
	"context"
	"fmt"
	"path/filepath"

	"platform.example/vm-migration/test/framework"
)

// InstallOnNode imports the images of the build in dir into env's node and
// installs the provisioner with its volumes under env's folder; it
// returns the build and that folder.
func InstallOnNode(ctx context.Context, env *framework.Environment, dir string, logf func(string, ...any)) (*Build, string, error) {
	b, err := LoadBuild(dir)
	if err != nil {
		return nil, "", err
	}
	for _, tb := range b.Tarballs {
		if err := env.ImportImage(ctx, tb); err != nil {
			return nil, "", fmt.Errorf("importing %s: %w", tb, err)
		}
	}
	root := filepath.Join(env.Dir(), "local-path")
	if err := Install(ctx, env.Config(), Options{Build: b, Root: root, Logf: logf}); err != nil {
		return nil, "", err
	}
	return b, root, nil
}
