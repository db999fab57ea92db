package main

import (
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/dig"
	"go.uber.org/fx/fxevent"

	"github.com/planwright/planwright/pkg/config"
	"github.com/planwright/planwright/pkg/logctx"
)

// logOutput is where the service logs (stderr) and whether it is a terminal.
type logOutput struct {
	w   io.Writer
	tty bool
}

func newLogOutput(w io.Writer) logOutput {
	f, ok := w.(*os.File)
	if !ok {
		return logOutput{w: w}
	}
	fi, err := f.Stat()
	return logOutput{w: w, tty: err == nil && fi.Mode()&os.ModeCharDevice != 0}
}

// newLogger builds the service's logger: JSON lines, or a human console
// format when log.format is console, or auto on a terminal.
func newLogger(cfg config.Config, out logOutput) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(cfg.Log.Level)
	if err != nil {
		return zerolog.Logger{}, err
	}
	w := out.w
	if cfg.Log.Format == config.FormatConsole || (cfg.Log.Format == config.FormatAuto && out.tty) {
		w = zerolog.ConsoleWriter{Out: out.w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(level).Hook(logctx.Hook{}).With().Timestamp().Logger(), nil
}

// fxLogger sends fx's own events through zerolog: the routine ones at debug
// level, failures at error level.
type fxLogger struct {
	log zerolog.Logger
}

var _ fxevent.Logger = fxLogger{}

func newFxLogger(log zerolog.Logger) fxevent.Logger {
	return fxLogger{log: log.With().Str("component", "fx").Logger()}
}

// LogEvent logs one fx event.
func (l fxLogger) LogEvent(event fxevent.Event) {
	switch e := event.(type) {
	case *fxevent.OnStartExecuting:
		l.log.Debug().Str("callee", e.FunctionName).Str("caller", e.CallerName).Msg("OnStart hook executing")
	case *fxevent.OnStartExecuted:
		l.result(e.Err).Str("callee", e.FunctionName).Str("caller", e.CallerName).
			Dur("runtime_ms", e.Runtime).Msg("OnStart hook executed")
	case *fxevent.OnStopExecuting:
		l.log.Debug().Str("callee", e.FunctionName).Str("caller", e.CallerName).Msg("OnStop hook executing")
	case *fxevent.OnStopExecuted:
		l.result(e.Err).Str("callee", e.FunctionName).Str("caller", e.CallerName).
			Dur("runtime_ms", e.Runtime).Msg("OnStop hook executed")
	case *fxevent.Supplied:
		l.result(e.Err).Str("type", e.TypeName).Str("module", e.ModuleName).Msg("supplied")
	case *fxevent.Provided:
		l.result(e.Err).Str("constructor", e.ConstructorName).Strs("types", e.OutputTypeNames).
			Str("module", e.ModuleName).Msg("provided")
	case *fxevent.Replaced:
		l.result(e.Err).Strs("types", e.OutputTypeNames).Str("module", e.ModuleName).Msg("replaced")
	case *fxevent.Decorated:
		l.result(e.Err).Str("decorator", e.DecoratorName).Strs("types", e.OutputTypeNames).
			Str("module", e.ModuleName).Msg("decorated")
	case *fxevent.BeforeRun:
		l.log.Debug().Str("name", e.Name).Str("kind", e.Kind).Str("module", e.ModuleName).Msg("before run")
	case *fxevent.Run:
		// A failed constructor also fails the invoke that needed it, which
		// logs the cause; this line is only for debugging the graph.
		l.log.Debug().AnErr("error", e.Err).Str("name", e.Name).Str("kind", e.Kind).Str("module", e.ModuleName).
			Dur("runtime_ms", e.Runtime).Msg("run")
	case *fxevent.Invoking:
		l.log.Debug().Str("function", e.FunctionName).Str("module", e.ModuleName).Msg("invoking")
	case *fxevent.Invoked:
		l.result(e.Err).Str("function", e.FunctionName).Str("module", e.ModuleName).Msg("invoked")
	case *fxevent.Stopping:
		l.log.Info().Str("signal", strings.ToUpper(e.Signal.String())).Msg("received signal")
	case *fxevent.Stopped:
		l.result(e.Err).Msg("stopped")
	case *fxevent.RollingBack:
		l.log.Error().Err(e.StartErr).Msg("start failed, rolling back")
	case *fxevent.RolledBack:
		l.result(e.Err).Msg("rolled back")
	case *fxevent.Started:
		l.result(e.Err).Msg("started")
	case *fxevent.LoggerInitialized:
		l.result(e.Err).Str("constructor", e.ConstructorName).Msg("logger initialized")
	}
}

// result starts a debug event, or an error event carrying the root cause
// of err (dig wraps a constructor's error in the whole chain of types that
// needed it).
func (l fxLogger) result(err error) *zerolog.Event {
	if err != nil {
		return l.log.Error().Err(dig.RootCause(err))
	}
	return l.log.Debug()
}
