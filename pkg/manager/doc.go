// Package manager wires the controller from a rest.Config: clients, the
// informer factories, the steps, the event recorder. The command's main and
// the integration tests both start the controller through it, so what the
// tests run is what ships.
package manager
