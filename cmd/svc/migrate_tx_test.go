package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"svc/store/postgres"
)

// refuseAtCommit makes tx's commit fail, after every statement in it
// succeeded: a deferred constraint trigger that raises, as a commit lost
// to a dropped connection or a failed check at commit would.
func refuseAtCommit(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
		CREATE FUNCTION svc_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'refused at commit'; END$$;
		CREATE TEMP TABLE svc_test_commit (x int);
		CREATE CONSTRAINT TRIGGER svc_test_refuse AFTER INSERT ON svc_test_commit
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION svc_test_refuse();
		INSERT INTO svc_test_commit VALUES (1)`)
	return err
}

// Both stores in one database commit together or not at all: a commit
// that fails once the activity store is copied leaves the main store
// out too, however the activity URL spells the database.
func TestMigrateOneDatabaseOneTransaction(t *testing.T) {
	tm := populate(t)
	for _, tt := range []struct {
		name string
		act  func(url string) string
	}{
		{"activity beside main", func(string) string { return "" }},
		{"the same database spelt otherwise", func(url string) string { return url + "&application_name=svc-migrate-test" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url := newPGDatabase(t)
			o, err := migrateConfig("sqlite:"+tm.main, "", url, tt.act(url))
			require.NoError(t, err)
			o.afterCopy = func(ctx context.Context, name string, tx pgx.Tx) error {
				if name == "activity" {
					return refuseAtCommit(ctx, tx)
				}
				return nil
			}
			var out bytes.Buffer
			err = runMigrate(t.Context(), o, &out)
			require.ErrorContains(t, err, "refused at commit", out.String())
			require.ErrorContains(t, err, "nothing was committed")
			require.NotContains(t, err.Error(), "the main store was committed")
			require.Zero(t, pgCount(t, url, "members"), "the main store is not in without the activity store")
			require.Zero(t, pgCount(t, url, "messages"))
			require.Zero(t, pgCount(t, url, "activity"))

			// And a second run, nothing left to replace, copies both.
			o.afterCopy = nil
			out.Reset()
			require.NoError(t, runMigrate(t.Context(), o, &out), out.String())
			require.Equal(t, tm.lastSeq, pgCount(t, url, "messages"))
			require.Equal(t, int64(2), pgCount(t, url, "activity"))
		})
	}
}

// An activity store in a database of its own has that database's use
// lock: svc migrate refuses it while a broker holds it, and holds it
// alone while it copies, so a broker cannot start on it meanwhile.
func TestMigrateActivityDatabaseUseLock(t *testing.T) {
	tm := populate(t)
	ctx := t.Context()

	t.Run("refused while a broker uses it", func(t *testing.T) {
		mainURL, actURL := newPGDatabase(t), newPGDatabase(t)
		brokerMain := newPGDatabase(t)
		act, err := openActivity(ctx, Config{DBURL: brokerMain, ActivityDBURL: actURL}, nil, nil, true)
		require.NoError(t, err)
		defer act.Close()
		out, err := runCmd(t, "migrate", "--from", "sqlite:"+tm.main, "--to", mainURL, "--to-activity", actURL)
		require.ErrorIs(t, err, postgres.ErrInUse, out)
		require.Contains(t, err.Error(), "activity target")
		require.Zero(t, pgCount(t, mainURL, "members"), "nothing copied")
		require.Zero(t, pgCount(t, actURL, "activity"))
	})

	t.Run("a broker cannot start on it during the copy", func(t *testing.T) {
		mainURL, actURL := newPGDatabase(t), newPGDatabase(t)
		o, err := migrateConfig("sqlite:"+tm.main, "", mainURL, actURL)
		require.NoError(t, err)
		tried := false
		o.afterCopy = func(ctx context.Context, name string, _ pgx.Tx) error {
			if name != "main" {
				return nil
			}
			tried = true
			act, err := openActivity(ctx, Config{DBURL: newPGDatabase(t), ActivityDBURL: actURL}, nil, nil, true)
			if err == nil {
				_ = act.Close()
			}
			require.ErrorIs(t, err, postgres.ErrInUse)
			return nil
		}
		var out bytes.Buffer
		require.NoError(t, runMigrate(ctx, o, &out), out.String())
		require.True(t, tried)
		require.Equal(t, int64(2), pgCount(t, actURL, "activity"))
	})
}
