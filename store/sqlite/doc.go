// Package sqlite implements the store interfaces on SQLite (mattn/go-sqlite3)
// with embedded migrations, one writer connection and a pool of readers.
package sqlite
