package persistence_test

import (
	"context"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/auth/authtest"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/chat/chattest"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/httpapi/httpapitest"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/planning/planningtest"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/approval"
	"github.com/planwright/planwright/tools/approval/approvaltest"
	"github.com/planwright/planwright/tools/builtin"
	"github.com/planwright/planwright/tools/builtin/builtintest"
	"github.com/planwright/planwright/tools/toolstest"
)

// The contract suites of every interface persistence implements, each on
// SQLite and PostgreSQL. A suite's cases run in parallel, each on the
// stores of a database of its own.

// contract runs suite as a parallel subtest per driver; stores gives each
// of the suite's cases the stores of a fresh, migrated database of that
// driver.
func contract(t *testing.T, suite func(t *testing.T, stores func(t *testing.T) dbtest.Stores)) {
	t.Helper()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			suite(t, func(t *testing.T) dbtest.Stores { return newStores(t, dbtest.Open(t, driver)) })
		})
	}
}

func TestPlanningStoreContract(t *testing.T) {
	t.Parallel()
	contract(t, func(t *testing.T, stores func(*testing.T) dbtest.Stores) {
		planningtest.StoreSuite(t, func(t *testing.T) planning.Store { return stores(t).PlanRecords }, persistence.AnyUser)
	})
}

func TestChatStoreContract(t *testing.T) {
	t.Parallel()
	contract(t, func(t *testing.T, stores func(*testing.T) dbtest.Stores) {
		chattest.StoreSuite(t, func(t *testing.T) chat.Store { return stores(t).Chats }, persistence.AnyUser)
	})
}

func TestChatDefinitionsContract(t *testing.T) {
	t.Parallel()
	contract(t, func(t *testing.T, stores func(*testing.T) dbtest.Stores) {
		chattest.DefinitionsSuite(t, func(t *testing.T) chattest.DefinitionStore { return stores(t).Definitions })
	})
}

func TestKeyStoreContract(t *testing.T) {
	t.Parallel()
	contract(t, func(t *testing.T, stores func(*testing.T) dbtest.Stores) {
		authtest.KeyStoreSuite(t, func(t *testing.T) auth.KeyStore { return stores(t).Keys }, persistence.AnyUser)
	})
}

func TestRecorderContract(t *testing.T) {
	t.Parallel()
	contract(t, func(t *testing.T, stores func(*testing.T) dbtest.Stores) {
		toolstest.RecorderSuite(t, func(t *testing.T) (tools.Recorder, toolstest.ListFunc) {
			s := stores(t).ToolExecutions
			return s, func(ctx context.Context, userID string) ([]tools.Execution, error) {
				return s.ListToolExecutions(ctx, userID, persistence.ToolExecutionFilter{})
			}
		})
	})
}

func TestToolHoldsContract(t *testing.T) {
	t.Parallel()
	contract(t, func(t *testing.T, stores func(*testing.T) dbtest.Stores) {
		approvaltest.StoreSuite(t, func(t *testing.T) approval.Store { return stores(t).ToolHolds }, persistence.AnyUser)
	})
}

func TestWorkspaceContract(t *testing.T) {
	t.Parallel()
	contract(t, func(t *testing.T, stores func(*testing.T) dbtest.Stores) {
		builtintest.StoreSuite(t, func(t *testing.T) builtin.Store { return stores(t).Workspace })
	})
}

func TestSessionsContract(t *testing.T) {
	t.Parallel()
	contract(t, func(t *testing.T, stores func(*testing.T) dbtest.Stores) {
		httpapitest.SessionsSuite(t, func(t *testing.T) httpapitest.SessionStore { return stores(t).Chats }, persistence.AnyUser)
	})
}

func TestPlanStoreContract(t *testing.T) {
	t.Parallel()
	contract(t, func(t *testing.T, stores func(*testing.T) dbtest.Stores) {
		httpapitest.PlanStoreSuite(t, func(t *testing.T) httpapitest.PlanRecords { return stores(t).PlanRecords }, persistence.AnyUser)
	})
}

func TestDefinitionStoreContract(t *testing.T) {
	t.Parallel()
	contract(t, func(t *testing.T, stores func(*testing.T) dbtest.Stores) {
		httpapitest.DefinitionStoreSuite(t, func(t *testing.T) httpapi.DefinitionStore { return stores(t).Definitions }, persistence.AnyUser)
	})
}

// The stores satisfy the interfaces pkg/httpapi declares (persistence may
// not import pkg/httpapi, so this is checked here).
var (
	_ httpapi.Sessions        = (*persistence.Chats)(nil)
	_ httpapi.PlanStore       = persistence.PlanRecords{}
	_ httpapi.DefinitionStore = (*persistence.Definitions)(nil)
	_ httpapi.KeyResolver     = (*persistence.Keys)(nil)
	_ httpapi.ProjectLister   = (*persistence.Workspace)(nil)
)

// The contract suites test interfaces, so they import no implementation;
// production code imports no test-support package (a package whose name
// ends in "test").
func TestSuitesAndProductionStayApart(t *testing.T) {
	t.Parallel()
	const module = "github.com/planwright/planwright/"
	suites := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.Base(filepath.Dir(path))
		if dir == "dbtest" {
			return nil // persistence's own test support
		}
		support := strings.HasSuffix(dir, "test")
		if support {
			suites++
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module) {
				continue
			}
			if support {
				require.False(t, strings.HasPrefix(p, module+"persistence"), "%s: a test-support package imports %s", path, p)
			} else {
				require.False(t, strings.HasSuffix(p, "test"), "%s: production code imports the test-support package %s", path, p)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Positive(t, suites)
}

func TestTranscriptsContract(t *testing.T) {
	t.Parallel()
	contract(t, func(t *testing.T, stores func(*testing.T) dbtest.Stores) {
		chattest.TranscriptsSuite(t, func(t *testing.T) chat.Transcripts { return stores(t).Executions })
	})
}

func TestRecordsContract(t *testing.T) {
	t.Parallel()
	contract(t, func(t *testing.T, stores func(*testing.T) dbtest.Stores) {
		toolstest.RecordsSuite(t, func(t *testing.T) toolstest.RecordStore { return stores(t).ToolExecutions })
	})
}
