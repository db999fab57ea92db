package chat_test

import (
	"testing"

	"github.com/planwright/planwright/persistence/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
