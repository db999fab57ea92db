// Package docs holds the architecture document and the test that keeps its
// map of a chat turn true to the code.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// code is what the repository declares, as the map names it.
type code struct {
	names   map[string]bool // every declared name: functions, types, methods, fields, constants, variables
	members map[string]bool // Type.Member and pkg.Type.Member: methods, fields, interface methods
	pkgs    map[string]bool // package names and directories
	files   []string        // every Go file, slash-separated, relative to the root
}

func (c *code) add(pkg string, f *ast.File) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			c.names[d.Name.Name] = true
			c.names[pkg+"."+d.Name.Name] = true
			if d.Recv != nil && len(d.Recv.List) == 1 {
				if typ := recvType(d.Recv.List[0].Type); typ != "" {
					c.members[typ+"."+d.Name.Name] = true
					c.members[pkg+"."+typ+"."+d.Name.Name] = true
				}
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					c.names[s.Name.Name] = true
					c.names[pkg+"."+s.Name.Name] = true
					c.addMembers(pkg, s)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						c.names[n.Name] = true
						c.names[pkg+"."+n.Name] = true
					}
				}
			}
		}
	}
}

func (c *code) addMembers(pkg string, s *ast.TypeSpec) {
	var fields *ast.FieldList
	switch t := s.Type.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return
	}
	for _, f := range fields.List {
		names := f.Names
		if len(names) == 0 { // embedded
			if id := recvType(f.Type); id != "" {
				names = []*ast.Ident{{Name: id}}
			}
		}
		for _, n := range names {
			c.names[n.Name] = true
			c.members[s.Name.Name+"."+n.Name] = true
			c.members[pkg+"."+s.Name.Name+"."+n.Name] = true
		}
	}
}

// recvType is the type name of a receiver or an embedded field.
func recvType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvType(t.X)
	case *ast.IndexExpr:
		return recvType(t.X)
	case *ast.IndexListExpr:
		return recvType(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.Ident:
		return t.Name
	}
	return ""
}

func load(t *testing.T, root string) *code {
	t.Helper()
	c := &code{names: map[string]bool{}, members: map[string]bool{}, pkgs: map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		c.files = append(c.files, filepath.ToSlash(rel))
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		c.pkgs[f.Name.Name], c.pkgs[dir] = true, true
		c.add(f.Name.Name, f)
		return nil
	})
	require.NoError(t, err)
	return c
}

// exists reports whether the map's name tok is in the code: a file, a
// package, a declared name, Type.Member, pkg.Name or pkg.Type.Member.
func (c *code) exists(tok string) bool {
	tok = strings.TrimSuffix(strings.TrimPrefix(tok, "*"), "()")
	if strings.HasSuffix(tok, ".go") {
		for _, f := range c.files {
			if f == tok || strings.HasSuffix(f, "/"+tok) {
				return true
			}
		}
		return false
	}
	if c.pkgs[tok] || c.names[tok] || c.members[tok] {
		return true
	}
	return false
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	goName     = regexp.MustCompile(`^\*?[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*(\(\))?$`)
)

// Every Go name and file the map "A chat turn, step by step" of
// ARCHITECTURE.md gives exists in the code (wire names such as
// agent_state or create_plan are left to the API's own tests).
func TestTurnMapNamesExist(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("ARCHITECTURE.md")
	require.NoError(t, err)
	text := string(doc)
	start := strings.Index(text, "### A chat turn, step by step")
	require.GreaterOrEqual(t, start, 0, "the map's heading")
	end := strings.Index(text[start+1:], "\n#")
	require.Greater(t, end, 0)
	table := text[start : start+1+end]

	c := load(t, "..")
	var missing []string
	checked := 0
	for _, m := range backticked.FindAllStringSubmatch(table, -1) {
		tok := m[1]
		if !strings.HasSuffix(tok, ".go") && (strings.Contains(tok, "/") || !goName.MatchString(tok)) {
			if !c.pkgs[tok] && strings.Contains(tok, "/") && !strings.Contains(tok, " ") {
				missing = append(missing, tok) // a package path that is gone
			}
			continue
		}
		checked++
		if !c.exists(tok) {
			missing = append(missing, tok)
		}
	}
	require.Greater(t, checked, 50, "the map names the code")
	require.Empty(t, missing, "names in ARCHITECTURE.md's turn map that the code does not declare")
}
