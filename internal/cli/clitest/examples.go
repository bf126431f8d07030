package clitest

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// CheckHelpExamples checks the help of the command newRoot builds and of
// every command under it: every example the help shows — each line of a
// command's Example, and each example line of its Long text (a line that
// begins "ROOT COMMAND", or "ROOT" for a root without subcommands, or pipes
// into ROOT) — names a command that exists, and its flags and arguments
// parse against that command's flag set and argument rule. A reference in
// the prose ('acemq serve --scheduler') names a command and flags that
// exist. It fails t if fewer than least examples and references were found
// (the extraction would be broken).
func CheckHelpExamples(t *testing.T, newRoot func() *cobra.Command, least int) {
	t.Helper()
	h := helpChecker{newRoot: newRoot, name: newRoot().Name()}
	h.quoted = regexp.MustCompile(`'` + regexp.QuoteMeta(h.name) + ` ([^']+)'`)
	checked := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, line := range strings.Split(c.Example, "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			checked++
			if err := h.parseExample(line); err != nil {
				t.Errorf("the example of %q, %q: %v", c.CommandPath(), strings.TrimSpace(line), err)
			}
		}
		for _, line := range strings.Split(c.Long, "\n") {
			trimmed := strings.TrimSpace(line)
			if h.isExampleLine(trimmed) {
				checked++
				if err := h.parseExample(line); err != nil {
					t.Errorf("the example in the help of %q, %q: %v", c.CommandPath(), trimmed, err)
				}
			}
		}
		for _, text := range []string{c.Short, c.Long} {
			for _, m := range h.quoted.FindAllStringSubmatch(text, -1) {
				checked++
				if err := h.checkReference(m[1]); err != nil {
					t.Errorf("the reference %q in the help of %q: %v", m[0], c.CommandPath(), err)
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
	t.Logf("%d example lines and references checked", checked)
	if checked < least {
		t.Fatalf("only %d examples found: is the extraction broken?", checked)
	}
}

// helpChecker checks the help of one binary, named name.
type helpChecker struct {
	newRoot func() *cobra.Command
	name    string
	quoted  *regexp.Regexp // a command named in prose: 'acemq publish --delay'
}

// isExampleLine reports whether a line of a Long text is a command line:
// it begins "ROOT COMMAND" (COMMAND a command of the root; "ROOT -" for a
// root without subcommands) or pipes into ROOT.
func (h helpChecker) isExampleLine(line string) bool {
	if strings.Contains(line, "| "+h.name+" ") {
		return true
	}
	words := strings.Fields(line)
	if len(words) < 2 || words[0] != h.name {
		return false
	}
	root := h.newRoot()
	if !root.HasSubCommands() {
		return strings.HasPrefix(words[1], "-")
	}
	for _, c := range root.Commands() {
		if c.Name() == words[1] {
			return true
		}
	}
	return false
}

// parseExample parses one example line as the shell would split it, takes
// the ROOT command of its pipeline, and parses its arguments.
func (h helpChecker) parseExample(line string) error {
	segments, err := shellSplit(line)
	if err != nil {
		return err
	}
	var args []string
	found := false
	for _, words := range segments {
		if len(words) > 0 && words[0] == h.name {
			args, found = words[1:], true
			break
		}
	}
	if !found {
		return fmt.Errorf("no %s command in it", h.name)
	}
	cmd, rest, err := h.newRoot().Find(args)
	if err != nil {
		return err
	}
	if cmd == cmd.Root() && cmd.HasSubCommands() {
		return fmt.Errorf("no such command: %v", args)
	}
	cmd.InitDefaultHelpFlag()
	if err := cmd.ParseFlags(rest); err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	return nil
}

// checkReference checks that the command named exists and has every flag
// named (values are often left out in prose, so they are not parsed).
func (h helpChecker) checkReference(ref string) error {
	words := strings.Fields(ref)
	var path []string
	for _, w := range words {
		if strings.HasPrefix(w, "-") {
			break
		}
		path = append(path, w)
	}
	cmd, rest, err := h.newRoot().Find(path)
	if err != nil {
		return err
	}
	if (cmd == cmd.Root() && cmd.HasSubCommands()) || len(rest) > 0 {
		return fmt.Errorf("no such command: %v", path)
	}
	cmd.InitDefaultHelpFlag()
	for _, w := range words[len(path):] {
		if !strings.HasPrefix(w, "--") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(w, "--"), "=")
		if cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil {
			return fmt.Errorf("%s has no flag --%s", cmd.CommandPath(), name)
		}
	}
	return nil
}

// shellSplit splits a command line into its pipeline's commands, each a
// list of words, with single quotes, double quotes and backslashes as a
// POSIX shell reads them (no expansion: $TOKEN stays as written).
func shellSplit(line string) ([][]string, error) {
	var (
		segments [][]string
		words    []string
		word     strings.Builder
		inWord   bool
	)
	endWord := func() {
		if inWord {
			words = append(words, word.String())
			word.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; ch {
		case ' ', '\t':
			endWord()
		case '|':
			endWord()
			segments = append(segments, words)
			words = nil
		case '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("an unclosed single quote")
			}
			word.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case '"':
			inWord = true
			for i++; ; i++ {
				if i >= len(line) {
					return nil, fmt.Errorf("an unclosed double quote")
				}
				if line[i] == '"' {
					break
				}
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`", line[i+1]) >= 0 {
					i++
				}
				word.WriteByte(line[i])
			}
		case '\\':
			if i+1 < len(line) {
				i++
				word.WriteByte(line[i])
				inWord = true
			}
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	endWord()
	return append(segments, words), nil
}
