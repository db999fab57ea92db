package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3".
var version string

// versionString describes this build: its version, Go version and platform.
func versionString() string {
	return fmt.Sprintf("planwright %s (%s, %s/%s)", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// buildVersion is the -ldflags version, else the VCS revision Go stamped
// into the binary, else the module version, else "dev".
func buildVersion() string {
	v := version
	info, ok := debug.ReadBuildInfo()
	if v == "" && ok {
		var rev, modified string
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		switch {
		case rev != "":
			v = rev[:min(len(rev), 12)]
			if modified == "true" {
				v += "-dirty"
			}
		case info.Main.Version != "" && info.Main.Version != "(devel)":
			v = info.Main.Version
		}
	}
	if v == "" {
		v = "dev"
	}
	return v
}

func newVersionCommand(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this build",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(env.Stdout, versionString())
			return err
		},
	}
}
