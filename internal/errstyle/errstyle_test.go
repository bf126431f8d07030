package errstyle

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// properNouns may begin a message or a sentence: names, not words.
var properNouns = map[string]bool{
	"Go": true, "Java": true, "Python": true, "Ruby": true, "Avro": true,
	"Protobuf": true, "PostgreSQL": true, "MySQL": true, "MariaDB": true,
}

// contractWording holds messages whose wording the family's wire contract
// fixes for every library of the family (docs/wire.md): they keep it,
// whatever this convention says.
var contractWording = map[string]string{
	// docs/wire.md §11.4: "N of M messages were not confirmed; K were. The
	// first failure was: …" — no library prefix.
	"%d of %d messages were not confirmed; %d were. The first failure was: %v": "publisher.go",
}

// message is where an error message starts and ends in the source: the
// leftmost and rightmost string literals of its expression.
type message struct {
	pos         token.Position
	pkg, own    string
	first, last string
	whole       bool // first and last are one literal: the whole message
	dir         string
	args        []string // the names of fmt.Errorf's arguments that are plain identifiers
}

// TestErrorMessages walks every non-test Go source of the module and checks
// each message given to errors.New or fmt.Errorf, and each string an Error
// method returns: it starts lower-case (unless it starts with a Go name, an
// acronym or a proper noun), ends without a period, holds no second
// sentence, and begins with no package name of the module but its own, at
// most once.
func TestErrorMessages(t *testing.T) {
	root := moduleRoot(t)
	msgs, sentinels, pkgNames, idents := scan(t, root)
	if len(msgs) < 500 || len(sentinels) < 20 {
		t.Fatalf("found %d messages and %d sentinels under %s; the walk is missing sources", len(msgs), len(sentinels), root)
	}
	for _, m := range msgs {
		if file, ok := contractWording[m.first]; ok && m.whole && filepath.Base(m.pos.Filename) == file {
			continue
		}
		for _, problem := range check(m, pkgNames, idents) {
			t.Errorf("%s: %s: %q", m.pos, problem, m.first)
		}
		// A message that begins with its package's name and wraps a
		// sentinel of the package that begins with it too says it twice.
		if !strings.HasPrefix(m.first, m.own+": ") {
			continue
		}
		for _, a := range m.args {
			if text, ok := sentinels[m.dir+"."+a]; ok && strings.HasPrefix(text, m.own+": ") {
				t.Errorf("%s: wraps %s, which begins with %q too: %q", m.pos, a, m.own+":", m.first)
			}
		}
	}
}

// TestCheck checks the checker on messages it must refuse and accept.
func TestCheck(t *testing.T) {
	pkgs := map[string]bool{"acemq": true, "rabbitmq": true, "rpc": true}
	idents := map[string]bool{"Consume": true}
	for _, c := range []struct {
		own, msg string
		bad      bool
	}{
		{"rpc", "rpc: the requester is closed", false},
		{"rpc", "waiting for a reply: %w", false},
		{"acemq", "acemq: Consume needs a handler", false},
		{"acemq", "acemq: WithPrefetch(%d): the prefetch must be 0 or more", false},
		{"acemq", "the URL %s is not an AMQP URL", false},
		{"rabbitmq", "acemq: nothing was published: %w", true},
		{"rabbitmq", "rabbitmq: publishing: rabbitmq: nothing was published", true},
		{"rpc", "The requester is closed", true},
		{"rpc", "rpc: The requester is closed", true},
		{"rpc", "the requester is closed.", true},
		{"acemq", "%d were not confirmed; %d were. The first failure was: %v", true},
		{"acemq", "no reason given", false},
		{"main", "decode: %w", false},
	} {
		first, last := c.msg, c.msg
		got := check(message{own: c.own, first: first, last: last, whole: true}, pkgs, idents)
		if bad := len(got) > 0; bad != c.bad {
			t.Errorf("check(%q in %s) = %v, want refused: %v", c.msg, c.own, got, c.bad)
		}
	}
}

var (
	prefixRE   = regexp.MustCompile(`^([a-z][a-z0-9]*): `)
	sentenceRE = regexp.MustCompile(`[.!?] +([A-Z][A-Za-z]*)`)
	wordRE     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*`)
)

func check(m message, pkgNames, idents map[string]bool) []string {
	var problems []string
	rest := m.first
	if p := prefixRE.FindStringSubmatch(rest); p != nil && pkgNames[p[1]] {
		if p[1] != m.own {
			problems = append(problems, fmt.Sprintf("begins with package %s's prefix in package %s", p[1], m.own))
		}
		rest = rest[len(p[0]):]
		if m.whole && strings.Contains(rest, m.own+": ") {
			problems = append(problems, "repeats its package's prefix")
		}
	}
	if w := wordRE.FindString(rest); w != "" && sentenceWord(w, idents) {
		problems = append(problems, "begins with a capital")
	}
	if strings.HasSuffix(strings.TrimRight(m.last, "\n"), ".") && !strings.HasSuffix(m.last, "...") {
		problems = append(problems, "ends with a period")
	}
	ends := []string{m.first}
	if !m.whole {
		ends = append(ends, m.last)
	}
	for _, s := range ends {
		for _, sm := range sentenceRE.FindAllStringSubmatch(s, -1) {
			if sentenceWord(sm[1], idents) {
				problems = append(problems, "holds a second sentence")
			}
		}
	}
	return problems
}

// sentenceWord reports whether w is a capitalised word rather than a Go
// name, an acronym or a proper noun.
func sentenceWord(w string, idents map[string]bool) bool {
	r := []rune(w)
	if !unicode.IsUpper(r[0]) || idents[w] || properNouns[w] {
		return false
	}
	for _, c := range r[1:] {
		if !unicode.IsLower(c) {
			return false // RabbitMQ, URL, WithPrefetch
		}
	}
	return true
}

func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// scan parses the module's non-test sources (not testdata, not nested
// modules) and returns their messages, the module's package names and the
// names it declares.
func scan(t *testing.T, root string) (msgs []message, sentinels map[string]string, pkgNames, idents map[string]bool) {
	fset := token.NewFileSet()
	sentinels = map[string]string{} // directory.Name → the text of its errors.New
	pkgNames = map[string]bool{}
	idents = map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			name := d.Name()
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		own := f.Name.Name
		if own == "main" {
			own = filepath.Base(filepath.Dir(path))
		} else {
			pkgNames[own] = true
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				idents[d.Name.Name] = true
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						idents[s.Name.Name] = true
					case *ast.ValueSpec:
						for i, n := range s.Names {
							idents[n.Name] = true
							if i < len(s.Values) {
								if c, ok := s.Values[i].(*ast.CallExpr); ok && callName(c) == "errors.New" && len(c.Args) == 1 {
									if first, _, _, ok := literalEnds(c.Args[0]); ok {
										sentinels[filepath.Dir(path)+"."+n.Name] = first
									}
								}
							}
						}
					}
				}
			}
		}
		add := func(e ast.Expr, args []ast.Expr) {
			first, last, whole, ok := literalEnds(e)
			if !ok {
				return
			}
			m := message{pos: fset.Position(e.Pos()), pkg: f.Name.Name, own: own, first: first, last: last, whole: whole, dir: filepath.Dir(path)}
			for _, a := range args {
				if id, ok := a.(*ast.Ident); ok {
					m.args = append(m.args, id.Name)
				}
			}
			msgs = append(msgs, m)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if name := callName(n); (name == "errors.New" || name == "fmt.Errorf") && len(n.Args) > 0 {
					add(n.Args[0], n.Args[1:])
				}
			case *ast.FuncDecl:
				if isErrorMethod(n) {
					ast.Inspect(n.Body, func(n ast.Node) bool {
						r, ok := n.(*ast.ReturnStmt)
						if !ok || len(r.Results) != 1 {
							return true
						}
						e := r.Results[0]
						if c, ok := e.(*ast.CallExpr); ok && callName(c) == "fmt.Sprintf" && len(c.Args) > 0 {
							e = c.Args[0]
						}
						add(e, nil)
						return true
					})
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pkgNames["acemq"] = true // the root, and the command named after it
	return msgs, sentinels, pkgNames, idents
}

func callName(c *ast.CallExpr) string {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	return id.Name + "." + sel.Sel.Name
}

func isErrorMethod(f *ast.FuncDecl) bool {
	if f.Recv == nil || f.Name.Name != "Error" || f.Type.Params.NumFields() != 0 || f.Type.Results.NumFields() != 1 {
		return false
	}
	id, ok := f.Type.Results.List[0].Type.(*ast.Ident)
	return ok && id.Name == "string"
}

// literalEnds returns the leftmost and rightmost string literals of e, a
// literal or a + chain with literals at its ends; whole is true when e is
// one literal.
func literalEnds(e ast.Expr) (first, last string, whole, ok bool) {
	e = ast.Unparen(e)
	if lit, isLit := e.(*ast.BasicLit); isLit && lit.Kind == token.STRING {
		s, err := strconv.Unquote(lit.Value)
		return s, s, true, err == nil
	}
	b, isBin := e.(*ast.BinaryExpr)
	if !isBin || b.Op != token.ADD {
		return "", "", false, false
	}
	first, _, _, okL := literalEnds(b.X)
	_, last, _, okR := literalEnds(b.Y)
	if !okL {
		return "", "", false, false
	}
	if !okR {
		last = ""
	}
	return first, last, false, true
}
