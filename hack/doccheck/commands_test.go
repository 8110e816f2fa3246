package doccheck

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"platform.example/vm-migration/pkg/cli"
)

// repoRoot is the repository's root folder.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// documented is a command quoted in the documentation, where it stands.
type documented struct {
	where, command string
}

// shellBlock matches the opening fence of a shell code block.
var shellBlock = regexp.MustCompile("^```(sh|bash|shell|console)\\s*$")

// documentedCommands reads every shell code block of README.md and
// docs/**/*.md.
func documentedCommands(t *testing.T, root string) []documented {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	require.NoError(t, err, "listing docs/")
	var out []documented
	for _, f := range files {
		out = append(out, commandsOf(t, root, f)...)
	}
	return out
}

// commandsOf extracts the commands of one Markdown file's shell blocks.
func commandsOf(t *testing.T, root, path string) []documented {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	rel, _ := filepath.Rel(root, path)
	var out []documented
	in, cont := false, ""
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case !in && shellBlock.MatchString(strings.TrimSpace(line)):
			in = true
			continue
		case in && strings.TrimSpace(line) == "```":
			in = false
			continue
		case !in:
			continue
		}
		line = stripComment(line)
		if line == "" {
			continue
		}
		if c, ok := strings.CutSuffix(line, "\\"); ok {
			cont += c + " "
			continue
		}
		out = append(out, documented{where: rel + ":" + itoa(n), command: collapse(cont + line)})
		cont = ""
	}
	return out
}

// stripComment drops a line's comment (# at its start, or after a space
// outside quotes) and surrounding space.
func stripComment(line string) string {
	quote := rune(0)
	for i, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '\'' || r == '"'):
			quote = r
		case quote == 0 && r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimSpace(line[:i])
		}
	}
	return strings.TrimSpace(line)
}

func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for n >= 10 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	i--
	b[i] = byte('0' + n)
	return string(b[i:])
}

// runSources is what the repository runs: the Makefile, scripts and Go
// sources of test/ and hack/, each with its whitespace collapsed.
func runSources(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	add := func(p string) {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out = append(out, collapse(string(b)))
	}
	add(filepath.Join(root, "Makefile"))
	for _, dir := range []string{"hack", "test"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if strings.HasSuffix(p, ".sh") || strings.HasSuffix(p, ".go") && !strings.Contains(p, "/doccheck/") {
				add(p)
			}
			return nil
		})
		require.NoError(t, err)
	}
	return out
}

// makeTargets are the Makefile's targets, and the text of the Makefile and
// of the scripts it calls (where its variables are read).
func makeTargets(t *testing.T, root string) (map[string]bool, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	targets := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := regexp.MustCompile(`^([a-z][a-z0-9-]*):`).FindStringSubmatch(line); m != nil {
			targets[m[1]] = true
		}
	}
	text := string(b)
	scripts, _ := filepath.Glob(filepath.Join(root, "hack", "*.sh"))
	for _, s := range scripts {
		sb, err := os.ReadFile(s)
		require.NoError(t, err)
		text += string(sb)
	}
	return targets, text
}

// TestDocumentedCommandsRun checks each documented command against the
// rules of the package documentation.
func TestDocumentedCommandsRun(t *testing.T) {
	root := repoRoot(t)
	docs := documentedCommands(t, root)
	require.NotEmpty(t, docs, "no shell command in README.md or docs/")
	sources := runSources(t, root)
	targets, makeText := makeTargets(t, root)
	for _, d := range docs {
		words := strings.Fields(d.command)
		switch {
		case words[0] == "make":
			checkMake(t, d, words[1:], targets, makeText)
		case len(words) > 1 && words[0] == "kubectl" && words[1] == "vmm":
			checkPlugin(t, d, words[2:])
		case words[0] == "kubectl":
			checkKubectl(t, d, words[1:], sources)
		default:
			found := false
			for _, s := range sources {
				if strings.Contains(s, d.command) {
					found = true
					break
				}
			}
			assert.True(t, found, "%s: %q is run by no test, script or make target (quote what they run, word for word)", d.where, d.command)
		}
	}
	t.Logf("%d documented commands checked", len(docs))
}

// checkMake: the target exists, each VAR= is read by the Makefile or its
// scripts.
func checkMake(t *testing.T, d documented, args []string, targets map[string]bool, makeText string) {
	t.Helper()
	for _, a := range args {
		if name, _, ok := strings.Cut(a, "="); ok {
			assert.True(t, strings.Contains(makeText, name), "%s: %q: the Makefile and its scripts never read %s", d.where, d.command, name)
			continue
		}
		assert.True(t, targets[a], "%s: %q: the Makefile has no target %s", d.where, d.command, a)
	}
}

// checkPlugin: kubectl vmm's command tree finds the subcommand and parses
// the flags.
func checkPlugin(t *testing.T, d documented, args []string) {
	t.Helper()
	root := cli.NewRootCommand(genericiooptions.NewTestIOStreamsDiscard())
	cmd, rest, err := root.Find(args)
	if !assert.NoError(t, err, "%s: %q: no such kubectl vmm command", d.where, d.command) {
		return
	}
	assert.NoError(t, cmd.ParseFlags(rest), "%s: %q: its flags do not parse", d.where, d.command)
}

// checkKubectl: a kubectl command is run word for word by a source, or a
// source runs kubectl with the same verb and every one of its flags (with
// their values), the names of objects being free.
func checkKubectl(t *testing.T, d documented, args []string, sources []string) {
	t.Helper()
	var verb string
	var flags []string
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "-"):
			flags = append(flags, strings.Trim(a, `'"`))
		case verb == "":
			verb = a
		}
	}
	for _, s := range sources {
		if strings.Contains(s, d.command) {
			return
		}
		if !strings.Contains(s, "kubectl") || !containsWord(s, verb) {
			continue
		}
		all := true
		for _, f := range flags {
			if !runsFlag(s, f) {
				all = false
				break
			}
		}
		if all {
			return
		}
	}
	assert.Fail(t, "kubectl command run by nothing", "%s: %q: no test, script or make target runs kubectl %s with the flags %v", d.where, d.command, verb, flags)
}

// containsWord says s holds w as a word of a command line or as a Go
// string ("w").
func containsWord(s, w string) bool {
	return strings.Contains(s, " "+w+" ") || strings.Contains(s, `"`+w+`"`)
}

// runsFlag says source s gives kubectl flag f: word for word, or, for
// --name=value, as a Go string "--name=" completed at run time (the test
// chooses the value, as the reader does).
func runsFlag(s, f string) bool {
	if strings.Contains(s, f) || strings.Contains(s, strings.ReplaceAll(f, "'", "")) {
		return true
	}
	name, _, ok := strings.Cut(f, "=")
	return ok && strings.Contains(s, `"`+name+`=" +`)
}
