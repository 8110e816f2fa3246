// Package doccheck holds the test that keeps the documentation honest:
// every command quoted in a shell code block of README.md or docs/ is one
// that a test, a script or a make target runs. A command is accepted when
//
//   - it is `make TARGET [VAR=value ...]` and the Makefile has the target,
//     each variable being one the Makefile or the scripts it calls read;
//   - it is `kubectl vmm ...` and the plugin's own command tree (pkg/cli)
//     parses it: the subcommand and every flag exist;
//   - it is another kubectl command, and a script, test or program under
//     hack/ or test/ runs it word for word, or runs kubectl with the same
//     verb and every flag the documentation gives (with its value, or,
//     where a Go test builds it as "--name=" + value, with a value of the
//     test's choosing); the names of objects and namespaces are the
//     reader's;
//   - otherwise, it appears, with its whitespace collapsed, in the Makefile,
//     a script under hack/, or a test or program under test/ and hack/:
//     the documentation quotes what those run, word for word.
//
// Lines starting with # are comments; a trailing backslash continues a
// command; a `# comment` after a command is not part of it.
//
// A second test keeps the troubleshooting guide whole: every exported
// Reason... string constant of pkg/statemachine, pkg/preflight and
// pkg/steps/... (the reasons of conditions, events and status.lastError)
// has a heading naming it in backquotes in docs/operators/troubleshooting.md.
package doccheck
