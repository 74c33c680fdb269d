package teamconfig_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/auth"
	"svc/server/teamconfig"
)

func FuzzParse(f *testing.F) {
	k := mustKEK(f)
	_, hash, err := auth.NewToken()
	require.NoError(f, err)
	def, err := teamconfig.Default(k, "0123abcd", "/srv/files", hash)
	require.NoError(f, err)
	defJSON, err := def.Marshal()
	require.NoError(f, err)

	for _, s := range []string{
		"", "\x00", "null", "{}", "[]", `"x"`, "{", `{"team":null,"store":null}`,
		string(defJSON),
		withMembers(`{"name":"bob","permissions":["operator","team.manage"],"token":"` + validToken(f) + `","totpSecret":"` + validTOTP + `"}`),
		withMembers(`{"name":"zoë","permissions":[]}`),
		withMembers(`{"name":"a","rawPermissions":["admin"],"totpSecret":{"v":1,"ct":"YQ==","iv":"YQ=="}}`),
		`{"team":{"name":"t","permissionPresets":{"ops":["objectives.create"]}},"store":{"members":[{"name":"a","permissions":["ops"]}]},"x":{"y":[1,2.0,"\u00e9"]}}`,
		`{"Team":{"name":"upper"},"team":{"name":"lower"},"store":{"members":[]}}`,
		`{"team":{"name":"a"},"team":{"directive":"b"},"store":{"members":[]}}`,
		// encoding/json matches keys case-insensitively, with Unicode
		// folding: "ſtore" (long s) is "store" too.
		`{"ſtore":{"members":[{"name":"a","permissions":[]}]},"store":{"members":[{"name":"b","permissions":[]}]}}`,
		`{"TEAM":{"name":"x"},"store":{"members":[]}}`,
		`{"store":{"members":[{"name":"a","permissions":[]}]},"webPush":{"vapidPublicKey":"p","vapidPrivateKey":"k"},"https":{"port":1,"cert":"c","key":"k"}}`,
		"{\"team\":{\"name\":\"\xff\"},\"x\xff\":\"<&>\"}",
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := teamconfig.Parse(data)
		if err != nil {
			require.Nil(t, cfg)
			return
		}
		require.NoError(t, cfg.Validate())

		// Round trip: what Marshal writes parses again and is stable. The
		// server relies on this: every change copies the config through
		// Marshal and Parse, and every boot reads what Save wrote.
		first, err := cfg.Marshal()
		require.NoError(t, err)
		again, err := teamconfig.Parse(first)
		require.NoError(t, err, "re-parsing\n%s", first)
		second, err := again.Marshal()
		require.NoError(t, err)
		require.Equal(t, string(first), string(second))

		// Migrate is idempotent: after a successful migration nothing is
		// left to migrate, and the result is still a valid config.
		changed, err := again.Migrate(k)
		if err != nil {
			return
		}
		_ = changed
		require.NoError(t, again.Validate())
		migrated, err := again.Marshal()
		require.NoError(t, err)
		reread, err := teamconfig.Parse(migrated)
		require.NoError(t, err, "re-parsing migrated\n%s", migrated)
		changed, err = reread.Migrate(k)
		require.NoError(t, err)
		require.False(t, changed, "second Migrate changed\n%s", migrated)
	})
}
