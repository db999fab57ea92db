package config_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Configuration sits below the domain: it shares vocabulary types
// (pkg/planmode) but imports no domain package, so the modes and the
// like are declared once and the layering holds.
func TestConfigImportsNoDomainPackage(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, domain := range []string{"/planning", "/pkg/chat", "/persistence", "/pkg/httpapi", "/agents", "/tools"} {
				require.False(t, strings.HasPrefix(path, "github.com/planwright/planwright"+domain), "%s imports %s", name, path)
			}
		}
	}
}
