package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// TestDecide is the pairing rule of docs/DECISIONS.md, "What a boot may
// assume", case by case: which combination of config, database and files
// is a first boot, a start, or a refusal, and what a refusal names.
func TestDecide(t *testing.T) {
	const cfg, db, root = "/etc/svc/svc.json", "/var/svc/svc.db", "/etc/svc/svc-files"
	data := store.Census{Members: 3, Messages: 12, FileEntries: 4}
	tests := []struct {
		name string
		p    pairing
		want verdict
		// refusals: substrings of the message
		refused []string
	}{
		{name: "all new", p: pairing{dbPath: db}, want: firstBoot},
		{name: "all new, in-memory", p: pairing{}, want: firstBoot},
		{name: "all new, an interrupted first boot left the team id", p: pairing{dbPath: db, db: storeFacts{teamID: "A"}}, want: firstBoot},
		{
			name:    "config missing, database holds a team",
			p:       pairing{dbPath: db, dbExisted: true, db: storeFacts{census: data, teamID: "A"}},
			refused: []string{cfg + " does not exist", db, "3 members, 12 messages, 4 file entries", "--config-path", "--db-path"},
		},
		{
			name:    "config missing, database from before team ids holds a team",
			p:       pairing{dbPath: db, dbExisted: true, db: storeFacts{census: data}},
			refused: []string{cfg + " does not exist", "3 members"},
		},
		{
			name:    "config missing, files but an empty database",
			p:       pairing{dbPath: db, dbExisted: true, blobs: 47},
			refused: []string{cfg + " does not exist", "the database " + db + " is empty", root + " holds 47 files", "--db-path"},
		},
		{
			name:    "config missing, files, in-memory",
			p:       pairing{blobs: 47},
			refused: []string{"no --db-path was given", root + " holds 47 files"},
		},
		{name: "hand-written config, new database", p: pairing{configExists: true, dbPath: db}, want: normalStart},
		{name: "hand-written config, in-memory", p: pairing{configExists: true}, want: normalStart},
		{name: "config and database from before team ids", p: pairing{configExists: true, dbPath: db, dbExisted: true, db: storeFacts{census: data}, blobs: 4}, want: normalStart},
		{name: "an upgrade interrupted after the config got its id", p: pairing{configExists: true, configID: "A", dbPath: db, dbExisted: true, db: storeFacts{census: data}, blobs: 4}, want: normalStart},
		{name: "config and database of one team", p: pairing{configExists: true, configID: "A", dbPath: db, dbExisted: true, db: storeFacts{census: data, teamID: "A"}, blobs: 4}, want: normalStart},
		{
			name:    "config without id, files, new database",
			p:       pairing{configExists: true, dbPath: db, blobs: 47},
			refused: []string{"the database " + db + " does not exist", root + " holds 47 files", cfg, "--db-path"},
		},
		{
			name:    "config without id, files, in-memory",
			p:       pairing{configExists: true, blobs: 47},
			refused: []string{"no --db-path was given", "in-memory", root + " holds 47 files"},
		},
		{
			name:    "config of a team, database of another",
			p:       pairing{configExists: true, configID: "A", dbPath: db, dbExisted: true, db: storeFacts{census: data, teamID: "B"}},
			refused: []string{cfg + " belongs to team A", db + " to team B", "--db-path", "--config-path"},
		},
		{
			name:    "config without id, database of a team",
			p:       pairing{configExists: true, dbPath: db, dbExisted: true, db: storeFacts{census: data, teamID: "B"}},
			refused: []string{db + " belongs to team B", cfg + " names no team", `"id": "B"`},
		},
		{
			name:    "config of a team, empty database",
			p:       pairing{configExists: true, configID: "A", dbPath: db, dbExisted: true},
			refused: []string{cfg + " belongs to team A", "the database " + db + " is empty", `delete "id"`},
		},
		{
			name:    "config of a team, no --db-path",
			p:       pairing{configExists: true, configID: "A"},
			refused: []string{cfg + " belongs to team A", "no --db-path was given"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.configPath = cfg
			if tc.p.root == "" {
				tc.p.root = root
			}
			got, err := decide(tc.p)
			if tc.refused == nil {
				require.NoError(t, err)
				require.Equal(t, tc.want, got)
				return
			}
			var re *refusedError
			require.ErrorAs(t, err, &re)
			var ee *exitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, 1, ee.code)
			require.Contains(t, err.Error(), "refusing to start: ")
			require.Contains(t, err.Error(), "Nothing was changed.")
			for _, s := range tc.refused {
				require.Contains(t, err.Error(), s)
			}
		})
	}
}
