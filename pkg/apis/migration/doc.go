// Package migration holds the API group of the VM migration controller.
package migration

// GroupName is the API group of every type under this package.
const GroupName = "migration.platform.example"
