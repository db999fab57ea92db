package main

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/planwright/planwright/pkg/config"
	"github.com/planwright/planwright/pkg/httpapi"
)

// hooks is an fx.Lifecycle that keeps what is appended.
type hooks []fx.Hook

func (h *hooks) Append(hook fx.Hook) { *h = append(*h, hook) }

type noShutdown struct{}

func (noShutdown) Shutdown(...fx.ShutdownOption) error { return nil }

type pingOK struct{}

func (pingOK) Ping(context.Context) error { return nil }

// What is opened after serve closed everything — a start hook that was in
// progress when a stop cancelled the start, which fx then neither waits
// for nor stops — is closed at once.
func TestOpenedClosesLateAdditions(t *testing.T) {
	t.Parallel()
	var res opened
	var order []string
	res.add(func() error { order = append(order, "db"); return nil })
	res.add(func() error { order = append(order, "jobs"); return nil })
	res.closeAll()
	require.Equal(t, []string{"jobs", "db"}, order, "last opened first")
	res.add(func() error { order = append(order, "late"); return nil })
	require.Equal(t, []string{"jobs", "db", "late"}, order)
	res.closeAll()
	require.Len(t, order, 3, "each once")
}

// The HTTP server's start hook registers its shutdown with what serve
// closes: started after serve closed everything (the hook outlived a
// cancelled start), it stops at once instead of serving on, leaked.
func TestHTTPServerStartedLateIsClosed(t *testing.T) {
	t.Parallel()
	srv, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", DB: pingOK{}, Logger: zerolog.Nop()})
	require.NoError(t, err)
	var lc hooks
	var res opened
	runHTTPServer(&lc, noShutdown{}, srv, config.Default(), zerolog.Nop(), &res)
	require.Len(t, lc, 1)
	res.closeAll() // serve, after the cancelled start
	require.NoError(t, lc[0].OnStart(t.Context()))
	select {
	case <-srv.Stopped():
	case <-time.After(10 * time.Second):
		_ = srv.Shutdown(context.Background())
		t.Fatal("the server started after everything was closed kept serving")
	}
}
