// Package migrations embeds the SQL migrations of both dialects. The two sets
// are kept in lockstep: every version exists in both, and a test in
// persistence proves they produce the same tables and columns.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Postgres returns the PostgreSQL migrations.
func Postgres() fs.FS { return sub("postgres") }

// SQLite returns the SQLite migrations.
func SQLite() fs.FS { return sub("sqlite") }

func sub(dir string) fs.FS {
	f, err := fs.Sub(files, dir)
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	return f
}
