// Package untrusted bounds the strings the controller takes from vSphere
// and from inside the guest (VMware Tools' report of the guest's network,
// the guest's own files as the conversion reads them, its guest agent)
// before they reach a file, an argument, a name or a message.
//
// It is the one place that says what such a string may hold:
//   - Field: one field of a line-oriented file (network.conf) or one
//     argument (virt-v2v.args): no whitespace, no control or format
//     characters, valid UTF-8, bounded;
//   - Text: a value inside a structured document (the domain XML, a JSON
//     job spec, an annotation), where a space is no separator: no control
//     or format characters, no line separators, valid UTF-8, bounded;
//   - Addr: an IP address in its canonical form, without a zone;
//   - InterfaceName: a network interface name as Linux and systemd take it;
//   - Quote and Clean: the printable forms messages and status show;
//   - Cut and CleanCut: a value bounded for status, its cut marked
//     (CutMarker).
//
// It is a leaf: it imports the standard library only.
package untrusted
