package postgres

import (
	"context"

	"svc/store"
)

// ActivityBetween returns every row with after < id <= upTo, oldest first
// (store.ActivityRanger). Ids are assigned under the activity store's one
// writer, so once an id is committed every smaller one is visible.
func (db *ActivityDB) ActivityBetween(ctx context.Context, after, upTo int64) ([]store.ActivityEvent, error) {
	return db.queryActivity(ctx, "activity between", 0, `SELECT `+activityColumns+` FROM activity WHERE id > ? AND id <= ? ORDER BY id`, after, upTo)
}
