package postgres

import (
	"context"
	"errors"
)

// Use takes the use lock of the activity store's database, on a watched
// connection of its own as WithUseLock does the main store's: a broker
// whose activity store is in a database of its own holds it shared there
// too, and svc migrate holds it alone while it fills that database, so
// neither runs under the other. In the main store's database the lock
// taken through WithUseLock covers both stores. Close releases it.
func (db *ActivityDB) Use(ctx context.Context, exclusive bool) error {
	if db.c.use != nil {
		return errors.New("the activity store already holds its use lock")
	}
	u, err := takeUse(ctx, db.c.pool.Config().ConnConfig.Copy(), exclusive, defaultUseCheck, db.c.health)
	if err != nil {
		return err
	}
	db.c.use = u
	return nil
}
