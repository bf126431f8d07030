package acemq_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestCallbackOptionsAreWithOn: across the module, an exported option
// (a function named With…) that takes a callback — a function that
// returns nothing, called when something happens — is named WithOn…, and
// no With… function is a method (a builder method of a value is named for
// what it does, as retry.Policy.Jitter is).
func TestCallbackOptionsAreWithOn(t *testing.T) {
	fset := token.NewFileSet()
	seen := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() || !strings.HasPrefix(fn.Name.Name, "With") {
				continue
			}
			seen++
			if fn.Recv != nil {
				t.Errorf("%s: %s is a method named like an option", fset.Position(fn.Pos()), fn.Name.Name)
				continue
			}
			for _, p := range fn.Type.Params.List {
				ft, ok := p.Type.(*ast.FuncType)
				if ok && (ft.Results == nil || len(ft.Results.List) == 0) && !strings.HasPrefix(fn.Name.Name, "WithOn") {
					t.Errorf("%s: %s takes a callback; name it WithOn…", fset.Position(fn.Pos()), fn.Name.Name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 50 {
		t.Fatalf("found %d With… functions; the walk is missing sources", seen)
	}
}
