package postgres

import "context"

// Use takes the use lock of the activity store's database, as DB.Use does
// the main store's: a broker whose activity store is in a database of its
// own holds it shared there too, and svc migrate holds it alone while it
// fills that database, so neither runs under the other. In the main
// store's database the one lock taken through DB.Use covers both stores.
func (db *ActivityDB) Use(ctx context.Context, exclusive bool) error {
	// The lock lives on the pool's connections, which both kinds of store
	// share the code of: DB.Use is the one implementation.
	return (&DB{c: db.c}).Use(ctx, exclusive)
}
