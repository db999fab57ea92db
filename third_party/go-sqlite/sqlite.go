// Package sqlite stands in for github.com/glebarez/go-sqlite, the driver
// gorm's pure-Go SQLite dialector (github.com/glebarez/sqlite) imports.
// That fork of modernc.org/sqlite stopped at an old version which parses
// every statement each time it runs, even a prepared one; current
// modernc.org/sqlite keeps a prepared statement compiled. Both register the
// database/sql driver "sqlite", so they cannot be linked together: this
// package is the fork's API over modernc.org/sqlite (go.mod replaces the
// fork with it). The dialector needs only the driver's error type.
package sqlite

import msqlite "modernc.org/sqlite"

// Error is the driver's error (Code is SQLite's extended result code).
type Error = msqlite.Error
