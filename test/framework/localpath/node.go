package localpath

import (
	"context"
	"fmt"
	"path/filepath"

	"platform.example/vm-migration/test/framework"
)

// InstallOnNode imports the images of the build in dir into env's node and
// installs the provisioner with its volumes under env's folder
// (NodeVolumes); it returns the build and that folder.
func InstallOnNode(ctx context.Context, env *framework.Environment, dir string, logf func(string, ...any)) (*Build, string, error) {
	b, err := LoadBuild(dir)
	if err != nil {
		return nil, "", err
	}
	if err := ImportImages(ctx, env, b); err != nil {
		return nil, "", err
	}
	root := NodeVolumes(env)
	if err := Install(ctx, env.Config(), Options{Build: b, Root: root, Logf: logf}); err != nil {
		return nil, "", err
	}
	return b, root, nil
}

// NodeVolumes is the folder of env's node for local-path's volumes.
func NodeVolumes(env *framework.Environment) string { return filepath.Join(env.Dir(), "local-path") }

// ImportImages imports the build's image tarballs into env's node.
func ImportImages(ctx context.Context, env *framework.Environment, b *Build) error {
	for _, tb := range b.Tarballs {
		if err := env.ImportImage(ctx, tb); err != nil {
			return fmt.Errorf("importing %s: %w", tb, err)
		}
	}
	return nil
}
