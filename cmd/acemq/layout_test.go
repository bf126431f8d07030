package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds a function of the CLI: one that does more is cut into
// steps a reader can name.
const maxFuncLines = 60

// TestNoLongFunctions: no function of the CLI's code (this command,
// acemq-bench, internal/cli and the commands under it; tests aside) is
// longer than maxFuncLines lines.
func TestNoLongFunctions(t *testing.T) {
	seen := 0
	for _, root := range []string{".", "../acemq-bench", "../../internal/cli"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				seen++
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s is %d lines long (at most %d)", path, fd.Name.Name, n, maxFuncLines)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if seen < 100 {
		t.Fatalf("only %d functions found: is the walk broken?", seen)
	}
}
