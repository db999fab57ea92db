package planning_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/planwright/planwright/persistence/dbtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	dbtest.CloseShared()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
