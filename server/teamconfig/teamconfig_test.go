package teamconfig_test

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server/auth"
	"svc/server/kek"
	"svc/server/teamconfig"
)

// mustKEK returns a KEK with a random key.
func mustKEK(tb testing.TB) *kek.KEK {
	tb.Helper()
	key := make([]byte, kek.KeySize)
	_, err := rand.Read(key)
	require.NoError(tb, err)
	k, err := kek.New(key)
	require.NoError(tb, err)
	return k
}

// mustParse parses a config that must be valid.
func mustParse(tb testing.TB, data string) *teamconfig.File {
	tb.Helper()
	f, err := teamconfig.Parse([]byte(data))
	require.NoError(tb, err)
	return f
}

// mustSealedJSON seals plaintext for purpose and returns the JSON field.
func mustSealedJSON(tb testing.TB, k *kek.KEK, plaintext, purpose string) string {
	tb.Helper()
	s, err := k.Seal([]byte(plaintext), purpose)
	require.NoError(tb, err)
	b, err := json.Marshal(s)
	require.NoError(tb, err)
	return string(b)
}

// withMembers renders a config with the default presets and the given
// member entries (JSON objects).
func withMembers(members ...string) string {
	return `{"team":{"name":"t"},"store":{"members":[` + strings.Join(members, ",") + `]}}`
}

const (
	validTOTP = "JBSWY3DPEHPK3PXP"
	zeroHash  = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
)

func validToken(tb testing.TB) string {
	tb.Helper()
	tok, _, err := auth.NewToken()
	require.NoError(tb, err)
	return tok
}

func TestParseRejects(t *testing.T) {
	k := mustKEK(t)
	sealedV2 := strings.Replace(mustSealedJSON(t, k, validTOTP, "x"), `"v":1`, `"v":2`, 1)

	tests := []struct {
		name      string
		data      string
		wantEntry string // the offending entry, named in the error
		wantText  string // more of the error, checked when set
	}{
		{name: "unknown preset", data: withMembers(`{"name":"bob","permissions":["wizard"]}`), wantEntry: `store.members[0] ("bob")`, wantText: `"wizard"`},
		{name: "unknown preset in rawPermissions", data: withMembers(`{"name":"bob","permissions":[],"rawPermissions":["wizard"]}`), wantEntry: `store.members[0] ("bob")`, wantText: `"wizard"`},
		{name: "unknown preset on second member", data: withMembers(`{"name":"a","permissions":["admin"]}`, `{"name":"b","permissions":["team.manage","nope"]}`), wantEntry: `store.members[1] ("b")`, wantText: `"nope"`},
		{name: "preset of another team", data: `{"team":{"name":"t","permissionPresets":{"ops":["team.manage"]}},"store":{"members":[{"name":"bob","permissions":["admin"]}]}}`, wantEntry: `store.members[0] ("bob")`, wantText: `"admin"`},
		{name: "malformed name with space", data: withMembers(`{"name":"bad name","permissions":[]}`), wantEntry: `store.members[0] ("bad name")`, wantText: "malformed member name"},
		{name: "malformed name empty", data: withMembers(`{"name":"","permissions":[]}`), wantEntry: `store.members[0] ("")`, wantText: "malformed member name"},
		{name: "malformed name leading dot", data: withMembers(`{"name":".hidden","permissions":[]}`), wantEntry: `store.members[0] (".hidden")`},
		{name: "malformed name leading dash", data: withMembers(`{"name":"-x","permissions":[]}`), wantEntry: `store.members[0] ("-x")`},
		{name: "malformed name with colon", data: withMembers(`{"name":"a:b","permissions":[]}`), wantEntry: `store.members[0] ("a:b")`},
		{name: "malformed name with slash", data: withMembers(`{"name":"a/b","permissions":[]}`), wantEntry: `store.members[0] ("a/b")`},
		{name: "malformed name unicode", data: withMembers(`{"name":"zoë","permissions":[]}`), wantEntry: `store.members[0] ("zoë")`},
		{name: "malformed name too long", data: withMembers(`{"name":"` + strings.Repeat("a", 65) + `","permissions":[]}`), wantEntry: `store.members[0] ("` + strings.Repeat("a", 65) + `")`},
		{name: "malformed name trailing newline", data: withMembers(`{"name":"bob\n","permissions":[]}`), wantEntry: `store.members[0] ("bob\n")`},
		{name: "duplicate name", data: withMembers(`{"name":"bob","permissions":[]}`, `{"name":"alice","permissions":[]}`, `{"name":"bob","permissions":[]}`), wantEntry: `store.members[2] ("bob")`, wantText: "duplicate member name"},
		{name: "bad tokenHash hex", data: withMembers(`{"name":"bob","permissions":[],"tokenHash":"sha256:` + strings.Repeat("zz", 32) + `"}`), wantEntry: `store.members[0] ("bob").tokenHash`},
		{name: "bad tokenHash short", data: withMembers(`{"name":"bob","permissions":[],"tokenHash":"sha256:abcd"}`), wantEntry: `store.members[0] ("bob").tokenHash`},
		{name: "bad tokenHash algorithm", data: withMembers(`{"name":"bob","permissions":[],"tokenHash":"md5:` + strings.Repeat("00", 32) + `"}`), wantEntry: `store.members[0] ("bob").tokenHash`},
		{name: "bad tokenHash bare hex", data: withMembers(`{"name":"bob","permissions":[],"tokenHash":"` + strings.Repeat("00", 32) + `"}`), wantEntry: `store.members[0] ("bob").tokenHash`},
		{name: "bad plaintext token characters", data: withMembers(`{"name":"bob","permissions":[],"token":"svc_not ok!"}`), wantEntry: `store.members[0] ("bob").token`},
		{name: "bad plaintext token prefix", data: withMembers(`{"name":"bob","permissions":[],"token":"tk_` + strings.Repeat("A", 43) + `"}`), wantEntry: `store.members[0] ("bob").token`},
		{name: "totpSecret not base32", data: withMembers(`{"name":"bob","permissions":[],"totpSecret":"not base32!"}`), wantEntry: `store.members[0] ("bob").totpSecret`, wantText: "base32"},
		{name: "totpSecret base32 with digit 1", data: withMembers(`{"name":"bob","permissions":[],"totpSecret":"JBSWY3DPEHPK3PX1"}`), wantEntry: `store.members[0] ("bob").totpSecret`},
		{name: "totpSecret empty string", data: withMembers(`{"name":"bob","permissions":[],"totpSecret":""}`), wantEntry: `store.members[0] ("bob").totpSecret`},
		{name: "totpSecret number", data: withMembers(`{"name":"bob","permissions":[],"totpSecret":42}`), wantEntry: `store.members[0] ("bob").totpSecret`},
		{name: "totpSecret object v2", data: withMembers(`{"name":"bob","permissions":[],"totpSecret":` + sealedV2 + `}`), wantEntry: `store.members[0] ("bob").totpSecret`, wantText: "v=1"},
		{name: "totpSecret object v0", data: withMembers(`{"name":"bob","permissions":[],"totpSecret":{"ct":"YQ==","iv":"YQ=="}}`), wantEntry: `store.members[0] ("bob").totpSecret`},
		{name: "totpSecret object missing ct", data: withMembers(`{"name":"bob","permissions":[],"totpSecret":{"v":1,"iv":"YQ=="}}`), wantEntry: `store.members[0] ("bob").totpSecret`},
		{name: "totpSecret object unknown field", data: withMembers(`{"name":"bob","permissions":[],"totpSecret":{"v":1,"ct":"YQ==","iv":"YQ==","x":1}}`), wantEntry: `store.members[0] ("bob").totpSecret`},
		{name: "preset with unknown leaf", data: `{"team":{"name":"t","permissionPresets":{"ops":["objectives.create","objectives.fly"]}},"store":{"members":[]}}`, wantEntry: `team.permissionPresets["ops"]`, wantText: `"objectives.fly"`},
		{name: "preset made of presets", data: `{"team":{"name":"t","permissionPresets":{"a":["team.manage"],"b":["a"]}},"store":{"members":[]}}`, wantEntry: `team.permissionPresets["b"]`, wantText: `"a"`},
		{name: "preset named like a leaf", data: `{"team":{"name":"t","permissionPresets":{"team.manage":["team.manage"]}},"store":{"members":[]}}`, wantEntry: `team.permissionPresets["team.manage"]`, wantText: "leaf"},
		{name: "preset null", data: `{"team":{"name":"t","permissionPresets":{"ops":null}},"store":{"members":[]}}`, wantEntry: `team.permissionPresets["ops"]`},
		{name: "https port zero", data: `{"team":{"name":"t"},"store":{"members":[]},"https":{"port":0,"cert":"c","key":"k"}}`, wantEntry: "https.port"},
		{name: "https without key", data: `{"team":{"name":"t"},"store":{"members":[]},"https":{"port":443,"cert":"c"}}`, wantEntry: "https"},
		{name: "negative maxFileSize", data: `{"team":{"name":"t"},"store":{"members":[]},"files":{"root":"/x","maxFileSize":-1}}`, wantEntry: "files.maxFileSize"},
		{name: "negative quotaBytes", data: `{"team":{"name":"t"},"store":{"members":[]},"files":{"root":"/x","quotaBytes":-1}}`, wantEntry: "files.quotaBytes"},
		{name: "vapid private key number", data: `{"team":{"name":"t"},"store":{"members":[]},"webPush":{"vapidPublicKey":"x","vapidPrivateKey":7}}`, wantEntry: "webPush.vapidPrivateKey"},
		{name: "approver not a member", data: withMembers(`{"name":"a","permissions":[],"approvers":["ghost"]}`), wantEntry: `store.members[0] ("a").approvers`, wantText: `no member "ghost"`},
		{name: "approver of itself", data: withMembers(`{"name":"a","permissions":[],"approvers":["a"]}`), wantEntry: `store.members[0] ("a").approvers`, wantText: "its own"},
		{name: "approver twice", data: withMembers(`{"name":"a","permissions":[],"approvers":["b","b"]}`, `{"name":"b","permissions":[]}`), wantEntry: `store.members[0] ("a").approvers`, wantText: "twice"},
		{name: "approval expiry not a duration", data: `{"team":{"name":"t"},"store":{"members":[]},"approvals":{"expireAfter":"soon"}}`, wantEntry: "approvals.expireAfter"},
		{name: "approval expiry too short", data: `{"team":{"name":"t"},"store":{"members":[]},"approvals":{"expireAfter":"500ms"}}`, wantEntry: "approvals.expireAfter"},
		{name: "approval expiry too long", data: `{"team":{"name":"t"},"store":{"members":[]},"approvals":{"expireAfter":"25h"}}`, wantEntry: "approvals.expireAfter"},
		{name: "vapid private key empty", data: `{"team":{"name":"t"},"store":{"members":[]},"webPush":{"vapidPublicKey":"x","vapidPrivateKey":""}}`, wantEntry: "webPush.vapidPrivateKey"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := teamconfig.Parse([]byte(tc.data))
			require.Error(t, err)
			require.Nil(t, f)
			var ee *teamconfig.EntryError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, tc.wantEntry, ee.Entry)
			require.True(t, strings.HasPrefix(err.Error(), tc.wantEntry+": "), "error %q names %q", err, tc.wantEntry)
			if tc.wantText != "" {
				require.ErrorContains(t, err, tc.wantText)
			}
		})
	}
}

func TestParseRejectsMalformedJSON(t *testing.T) {
	tests := []struct {
		name string
		data string
	}{
		{name: "empty", data: ""},
		{name: "NUL", data: "\x00"},
		{name: "not json", data: "team: x"},
		{name: "array", data: `[]`},
		{name: "string", data: `"config"`},
		{name: "number", data: `1`},
		{name: "null", data: `null`},
		{name: "truncated", data: `{"team":{"name":"t"}`},
		{name: "trailing garbage", data: `{"team":{"name":"t"}} x`},
		{name: "two objects", data: `{} {}`},
		{name: "members not a list", data: `{"team":{"name":"t"},"store":{"members":"bob"}}`},
		{name: "permissions not a list", data: withMembers(`{"name":"bob","permissions":"admin"}`)},
		{name: "name not a string", data: withMembers(`{"name":7}`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := teamconfig.Parse([]byte(tc.data))
			require.Error(t, err)
			require.Nil(t, f)
		})
	}
}

func TestParseAccepts(t *testing.T) {
	k := mustKEK(t)
	tok := validToken(t)
	sealed := mustSealedJSON(t, k, validTOTP, teamconfig.TOTPPurpose("bob"))

	tests := []struct {
		name string
		data string
	}{
		{name: "minimal", data: `{"team":{"name":"t"},"store":{"members":[]}}`},
		{name: "empty object", data: `{}`},
		{name: "default presets", data: withMembers(`{"name":"a","permissions":["admin"]}`, `{"name":"b","permissions":["operator"]}`, `{"name":"c","permissions":["member"]}`)},
		{name: "presets and leaves mixed", data: `{"team":{"name":"t","permissionPresets":{"ops":["objectives.create","objectives.cancel"],"none":[]}},"store":{"members":[` +
			`{"name":"a","permissions":["ops","team.manage"],"rawPermissions":["ops","team.manage"]},` +
			`{"name":"b","permissions":["none"]},` +
			`{"name":"c","permissions":["activity.read","tools.manage"]}]}}`},
		{name: "names at the edges", data: withMembers(`{"name":"a","permissions":[]}`, `{"name":"`+strings.Repeat("z", 64)+`","permissions":[]}`, `{"name":"0._-A","permissions":[]}`)},
		{name: "null permissions", data: withMembers(`{"name":"a","permissions":null}`)},
		{name: "tokenHash", data: withMembers(`{"name":"a","permissions":[],"tokenHash":"` + zeroHash + `"}`)},
		{name: "upper-case tokenHash hex", data: withMembers(`{"name":"a","permissions":[],"tokenHash":"sha256:` + strings.Repeat("AB", 32) + `"}`)},
		{name: "plaintext token", data: withMembers(`{"name":"a","permissions":[],"token":"` + tok + `"}`)},
		{name: "plaintext totp", data: withMembers(`{"name":"a","permissions":[],"totpSecret":"` + validTOTP + `"}`)},
		{name: "plaintext totp lower case with padding", data: withMembers(`{"name":"a","permissions":[],"totpSecret":"mfrggzdf======"}`)},
		{name: "sealed totp", data: withMembers(`{"name":"bob","permissions":[],"totpSecret":` + sealed + `}`)},
		{name: "null totp", data: withMembers(`{"name":"a","permissions":[],"totpSecret":null}`)},
		{name: "every optional block", data: `{"team":{"name":"t","directive":"d","context":"c"},"store":{"members":[]},` +
			`"https":{"port":8443,"cert":"c.pem","key":"k.pem"},"webPush":{"vapidPublicKey":"pub","vapidPrivateKey":"priv"},` +
			`"jwt":{"issuer":"i","audience":"a","jwksUrl":"https://x/jwks"},"files":{"root":"/srv","maxFileSize":0}}`},
		{name: "unknown keys", data: `{"team":{"name":"t"},"store":{"members":[]},"x-operator":{"note":[1,2,3]},"future":true}`},
		{name: "approvers and approvals", data: `{"team":{"name":"t"},"store":{"members":[{"name":"a","permissions":[],"approvers":["b"]},{"name":"b","permissions":[]}]},"approvals":{"expireAfter":"90s"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := mustParse(t, tc.data)
			require.NoError(t, f.Validate())
			// A parsed config survives the Marshal-Parse copy the server
			// makes before every change.
			b, err := f.Marshal()
			require.NoError(t, err)
			again := mustParse(t, string(b))
			b2, err := again.Marshal()
			require.NoError(t, err)
			require.Equal(t, string(b), string(b2))
		})
	}
}

func TestApprovalSettingsSurviveARewrite(t *testing.T) {
	f := mustParse(t, `{"team":{"name":"t"},"store":{"members":[{"name":"a","permissions":[],"approvers":["b"]},{"name":"b","permissions":[]}]},"approvals":{"expireAfter":"90s"}}`)
	require.Equal(t, 90*time.Second, f.ApprovalExpiry())
	b, err := f.Marshal()
	require.NoError(t, err)
	again := mustParse(t, string(b))
	require.Equal(t, 90*time.Second, again.ApprovalExpiry(), "the approvals block is written back")
	require.Equal(t, []string{"b"}, again.Store.Members[0].Approvers)

	require.Equal(t, teamconfig.DefaultApprovalExpiry, mustParse(t, `{}`).ApprovalExpiry())
	again.DropApprover("b")
	require.Nil(t, again.Store.Members[0].Approvers, "a deleted member leaves every list")
}

func TestMarshalKeepsUnknownKeys(t *testing.T) {
	f := mustParse(t, `{"team":{"name":"t"},"store":{"members":[]},"x-operator":{"note":[1,2.50,"x"]},"future":true,"big":12345678901234567890}`)
	b, err := f.Marshal()
	require.NoError(t, err)
	var out map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &out))
	require.JSONEq(t, `{"note":[1,2.50,"x"]}`, string(out["x-operator"]))
	require.JSONEq(t, `true`, string(out["future"]))
	require.Equal(t, `12345678901234567890`, string(out["big"]), "numbers are kept verbatim")
	require.Contains(t, out, "team")
	require.Contains(t, out, "store")
	require.NotContains(t, out, "https", "absent optional blocks stay absent")

	// Known blocks are still rewritten from the struct.
	f.Team.Name = "renamed"
	b, err = f.Marshal()
	require.NoError(t, err)
	require.Contains(t, string(b), `"renamed"`)
	require.Contains(t, string(b), `"x-operator"`)
}

func TestMarshalDropsCaseVariantsOfKnownKeys(t *testing.T) {
	// encoding/json decodes "Store" and "ſtore" (long s) into the store
	// block. Kept as extra keys as well, a stale copy would override the
	// block when the server re-reads what it wrote.
	tests := []struct {
		name string
		data string
		want []string // member names after any number of round trips
	}{
		{name: "upper case", data: `{"STORE":{"members":[{"name":"a","permissions":[]}]}}`, want: []string{"a"}},
		{name: "long s after canonical", data: `{"store":{"members":[{"name":"b","permissions":[]}]},"ſtore":{"members":[{"name":"a","permissions":[]}]}}`, want: []string{"a"}},
		{name: "long s before canonical", data: `{"ſtore":{"members":[{"name":"a","permissions":[]}]},"store":{"members":[{"name":"b","permissions":[]}]}}`, want: []string{"b"}},
		{name: "duplicate block", data: `{"store":{"members":[]},"webPush":{"vapidPublicKey":"p","vapidPrivateKey":"x"},"webPush":{"vapidPublicKey":"q"}}`, want: []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := mustParse(t, tc.data)
			for range 3 {
				names := []string{}
				for _, m := range f.Store.Members {
					names = append(names, m.Name)
				}
				require.Equal(t, tc.want, names)
				b, err := f.Marshal()
				require.NoError(t, err)
				var out map[string]json.RawMessage
				require.NoError(t, json.Unmarshal(b, &out))
				for k := range out {
					require.Contains(t, []string{"team", "store", "webPush"}, k)
				}
				f = mustParse(t, string(b))
			}
		})
	}
}

func TestMigrate(t *testing.T) {
	k := mustKEK(t)
	tok := validToken(t)

	t.Run("plaintext token becomes tokenHash", func(t *testing.T) {
		f := mustParse(t, withMembers(`{"name":"bob","permissions":[],"token":"`+tok+`"}`))
		changed, err := f.Migrate(nil) // hashing needs no KEK
		require.NoError(t, err)
		require.True(t, changed)
		m := f.Store.Members[0]
		require.Empty(t, m.Token)
		require.Equal(t, teamconfig.FormatTokenHash(auth.HashToken(tok)), m.TokenHash)
		h, err := teamconfig.ParseTokenHash(m.TokenHash)
		require.NoError(t, err)
		require.Equal(t, [32]byte(auth.HashToken(tok)), h)

		b, err := f.Marshal()
		require.NoError(t, err)
		require.NotContains(t, string(b), tok)
		require.NotContains(t, string(b), `"token"`)
	})

	t.Run("base32 totpSecret is sealed", func(t *testing.T) {
		f := mustParse(t, withMembers(`{"name":"bob","permissions":[],"totpSecret":"`+validTOTP+`"}`))
		changed, err := f.Migrate(k)
		require.NoError(t, err)
		require.True(t, changed)
		m := f.Store.Members[0]
		require.True(t, m.HasTOTP())
		s, ok := m.SealedTOTP()
		require.True(t, ok)
		require.Equal(t, kek.Version, s.V)
		got, err := teamconfig.OpenTOTP(k, m)
		require.NoError(t, err)
		require.Equal(t, validTOTP, got)

		// Sealed for bob only: another member's purpose does not open it.
		_, err = k.Open(*s, teamconfig.TOTPPurpose("alice"))
		require.ErrorIs(t, err, kek.ErrDecrypt)

		b, err := f.Marshal()
		require.NoError(t, err)
		require.NotContains(t, string(b), validTOTP)
		again := mustParse(t, string(b))
		got, err = teamconfig.OpenTOTP(k, again.Store.Members[0])
		require.NoError(t, err)
		require.Equal(t, validTOTP, got)
	})

	t.Run("vapid private key is sealed", func(t *testing.T) {
		f := mustParse(t, `{"team":{"name":"t"},"store":{"members":[]},"webPush":{"vapidPublicKey":"pub","vapidPrivateKey":"private-scalar"}}`)
		changed, err := f.Migrate(k)
		require.NoError(t, err)
		require.True(t, changed)
		var s kek.Sealed
		require.NoError(t, json.Unmarshal(f.WebPush.VAPIDPrivateKey, &s))
		pt, err := k.Open(s, teamconfig.VAPIDPurpose)
		require.NoError(t, err)
		require.Equal(t, "private-scalar", string(pt))
		require.Equal(t, "pub", f.WebPush.VAPIDPublicKey)
	})

	t.Run("presets resolved, rawPermissions kept", func(t *testing.T) {
		f := mustParse(t, withMembers(`{"name":"bob","permissions":["operator","team.manage","objectives.create"]}`))
		changed, err := f.Migrate(nil)
		require.NoError(t, err)
		require.True(t, changed)
		m := f.Store.Members[0]
		require.Equal(t, []string{auth.ObjectivesCancel, auth.ObjectivesCreate, auth.ObjectivesWatch, auth.TeamManage}, m.Permissions)
		require.Equal(t, []string{"operator", "team.manage", "objectives.create"}, m.RawPermissions)
	})

	t.Run("existing rawPermissions are not overwritten", func(t *testing.T) {
		f := mustParse(t, withMembers(`{"name":"bob","permissions":["operator"],"rawPermissions":["admin"]}`))
		_, err := f.Migrate(nil)
		require.NoError(t, err)
		m := f.Store.Members[0]
		require.Equal(t, []string{auth.ObjectivesCancel, auth.ObjectivesCreate, auth.ObjectivesWatch}, m.Permissions)
		require.Equal(t, []string{"admin"}, m.RawPermissions)
	})

	t.Run("nil permissions resolved from rawPermissions", func(t *testing.T) {
		f := mustParse(t, withMembers(`{"name":"bob","rawPermissions":["operator","activity.read"]}`))
		changed, err := f.Migrate(nil)
		require.NoError(t, err)
		require.True(t, changed)
		m := f.Store.Members[0]
		require.Equal(t, []string{auth.ActivityRead, auth.ObjectivesCancel, auth.ObjectivesCreate, auth.ObjectivesWatch}, m.Permissions)
		require.Equal(t, []string{"operator", "activity.read"}, m.RawPermissions)
	})

	t.Run("nil permissions without raw become empty", func(t *testing.T) {
		f := mustParse(t, withMembers(`{"id":"b0b","name":"bob"}`))
		changed, err := f.Migrate(nil)
		require.NoError(t, err)
		require.False(t, changed)
		require.NotNil(t, f.Store.Members[0].Permissions)
		require.Empty(t, f.Store.Members[0].Permissions)
	})

	t.Run("resolved leaves kept when the preset later changes", func(t *testing.T) {
		f := mustParse(t, withMembers(`{"name":"bob","permissions":["operator"]}`))
		_, err := f.Migrate(nil)
		require.NoError(t, err)
		resolved := f.Store.Members[0].Permissions

		// The operator edits the preset; the stored member keeps its leaves.
		f.Team.PermissionPresets = map[string][]string{"operator": {auth.TeamManage}, "admin": auth.Leaves, "member": {}}
		b, err := f.Marshal()
		require.NoError(t, err)
		edited := mustParse(t, string(b))
		changed, err := edited.Migrate(nil)
		require.NoError(t, err)
		require.False(t, changed)
		require.Equal(t, resolved, edited.Store.Members[0].Permissions)
		require.Equal(t, []string{"operator"}, edited.Store.Members[0].RawPermissions)
	})

	t.Run("plaintext totp without KEK", func(t *testing.T) {
		f := mustParse(t, withMembers(`{"name":"bob","permissions":[],"totpSecret":"`+validTOTP+`"}`))
		changed, err := f.Migrate(nil)
		require.ErrorIs(t, err, teamconfig.ErrNoKEK)
		require.False(t, changed)
		var ee *teamconfig.EntryError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, `store.members[0] ("bob").totpSecret`, ee.Entry)
	})

	t.Run("plaintext vapid key without KEK", func(t *testing.T) {
		f := mustParse(t, `{"team":{"name":"t"},"store":{"members":[]},"webPush":{"vapidPublicKey":"pub","vapidPrivateKey":"p"}}`)
		_, err := f.Migrate(nil)
		require.ErrorIs(t, err, teamconfig.ErrNoKEK)
		require.ErrorContains(t, err, "webPush.vapidPrivateKey")
	})

	t.Run("sealed secrets need no KEK", func(t *testing.T) {
		sealed := mustSealedJSON(t, k, validTOTP, teamconfig.TOTPPurpose("bob"))
		f := mustParse(t, `{"team":{"name":"t"},"store":{"members":[{"id":"b0b","name":"bob","permissions":[],"totpSecret":`+sealed+`}]},`+
			`"webPush":{"vapidPublicKey":"pub","vapidPrivateKey":`+mustSealedJSON(t, k, "p", teamconfig.VAPIDPurpose)+`}}`)
		changed, err := f.Migrate(nil)
		require.NoError(t, err)
		require.False(t, changed)
	})

	t.Run("a member without an id gets one, kept after", func(t *testing.T) {
		f := mustParse(t, `{"team":{"name":"t"},"store":{"members":[{"name":"a","permissions":[]},{"id":"keep-me","name":"b","permissions":[]}]}}`)
		changed, err := f.Migrate(nil)
		require.NoError(t, err)
		require.True(t, changed)
		require.Regexp(t, `^[0-9a-f]{32}$`, f.Store.Members[0].ID)
		require.Equal(t, "keep-me", f.Store.Members[1].ID)
		b, err := f.Marshal()
		require.NoError(t, err)
		again := mustParse(t, string(b))
		require.Equal(t, f.Store.Members[0].ID, again.Store.Members[0].ID)
		changed, err = again.Migrate(nil)
		require.NoError(t, err)
		require.False(t, changed)
	})

	t.Run("member ids are checked", func(t *testing.T) {
		_, err := teamconfig.Parse([]byte(`{"team":{"name":"t"},"store":{"members":[{"id":"x y","name":"a","permissions":[]}]}}`))
		require.ErrorContains(t, err, `store.members[0] ("a").id`)
		_, err = teamconfig.Parse([]byte(`{"team":{"name":"t"},"store":{"members":[{"id":"x","name":"a","permissions":[]},{"id":"x","name":"b","permissions":[]}]}}`))
		require.ErrorContains(t, err, "another member's id")
	})

	t.Run("second Migrate reports unchanged", func(t *testing.T) {
		f := mustParse(t, `{"team":{"name":"t"},"store":{"members":[`+
			`{"name":"a","permissions":["admin"],"token":"`+tok+`","totpSecret":"`+validTOTP+`"},`+
			`{"name":"b","rawPermissions":["operator"]},`+
			`{"name":"c","permissions":["team.manage"]}]},`+
			`"webPush":{"vapidPublicKey":"pub","vapidPrivateKey":"priv"}}`)
		changed, err := f.Migrate(k)
		require.NoError(t, err)
		require.True(t, changed)
		first, err := f.Marshal()
		require.NoError(t, err)

		changed, err = f.Migrate(k)
		require.NoError(t, err)
		require.False(t, changed)
		second, err := f.Marshal()
		require.NoError(t, err)
		require.Equal(t, string(first), string(second))

		// And after the file is written and read back.
		reread := mustParse(t, string(first))
		changed, err = reread.Migrate(k)
		require.NoError(t, err)
		require.False(t, changed)
	})
}

func TestSave(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etc", "svc")
	path := filepath.Join(dir, "svc.json")
	f := mustParse(t, withMembers(`{"name":"bob","permissions":["admin"]}`))

	require.NoError(t, teamconfig.Save(path, f))
	assertSaved := func(t *testing.T) {
		t.Helper()
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		di, err := os.Stat(dir)
		require.NoError(t, err)
		require.True(t, di.IsDir())
		require.Equal(t, os.FileMode(0o700), di.Mode().Perm())
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1, "no temp files left behind")
		require.Equal(t, "svc.json", entries[0].Name())
	}
	assertSaved(t)

	loaded, err := teamconfig.Load(path)
	require.NoError(t, err)
	want, err := f.Marshal()
	require.NoError(t, err)
	got, err := loaded.Marshal()
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want)+"\n", string(raw))

	// Overwriting replaces the content, keeps the mode, leaves no temp.
	f.Team.Name = "second"
	require.NoError(t, teamconfig.Save(path, f))
	assertSaved(t)
	loaded, err = teamconfig.Load(path)
	require.NoError(t, err)
	require.Equal(t, "second", loaded.Team.Name)
}

func TestSaveTightensLooseFileMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "svc.json")
	require.NoError(t, os.WriteFile(path, []byte("{}"), 0o644))
	require.NoError(t, os.Chmod(path, 0o644))
	require.NoError(t, teamconfig.Save(path, mustParse(t, `{}`)))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the rename replaces the loose file")
}

func TestLoadNamesThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.json")
	require.NoError(t, os.WriteFile(path, []byte(withMembers(`{"name":"bob","permissions":["wizard"]}`)), 0o600))
	_, err := teamconfig.Load(path)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, `store.members[0] ("bob")`)

	_, err = teamconfig.Load(filepath.Join(t.TempDir(), "absent.json"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestDefault(t *testing.T) {
	k := mustKEK(t)
	tok, hash, err := auth.NewToken()
	require.NoError(t, err)
	f, err := teamconfig.Default(k, "0123abcd", "/srv/svc-files", hash)
	require.NoError(t, err)
	require.NoError(t, f.Validate())

	// It is a valid file on disk too, and needs no migration.
	b, err := f.Marshal()
	require.NoError(t, err)
	parsed := mustParse(t, string(b))
	changed, err := parsed.Migrate(k)
	require.NoError(t, err)
	require.False(t, changed)

	require.Equal(t, "team", parsed.Team.Name)
	require.Equal(t, "0123abcd", parsed.Team.ID, "the team id survives the file")
	require.Equal(t, auth.DefaultPresets(), parsed.Team.PermissionPresets)
	require.Len(t, parsed.Store.Members, 1)
	admin := parsed.Store.Members[0]
	require.Equal(t, "admin", admin.Name)
	require.ElementsMatch(t, auth.Leaves, admin.Permissions)
	require.Equal(t, []string{"admin"}, admin.RawPermissions)
	require.Equal(t, teamconfig.FormatTokenHash(auth.HashToken(tok)), admin.TokenHash)
	require.NotContains(t, string(b), tok)
	require.Equal(t, "/srv/svc-files", parsed.Files.Root)
	require.Equal(t, int64(teamconfig.DefaultMaxFileSize), parsed.Files.MaxFileSize)
	require.Nil(t, parsed.HTTPS)
	require.Nil(t, parsed.JWT)

	// VAPID public key: the 65-byte uncompressed P-256 point, base64url
	// without padding.
	pubStr := parsed.WebPush.VAPIDPublicKey
	require.NotContains(t, pubStr, "=")
	pub, err := base64.RawURLEncoding.Strict().DecodeString(pubStr)
	require.NoError(t, err)
	require.Len(t, pub, 65)
	require.Equal(t, byte(0x04), pub[0])
	_, err = ecdh.P256().NewPublicKey(pub)
	require.NoError(t, err)

	// The sealed private key opens to the matching 32-byte scalar.
	var s kek.Sealed
	require.NoError(t, json.Unmarshal(parsed.WebPush.VAPIDPrivateKey, &s))
	pt, err := k.Open(s, teamconfig.VAPIDPurpose)
	require.NoError(t, err)
	require.NotContains(t, string(pt), "=")
	scalar, err := base64.RawURLEncoding.Strict().DecodeString(string(pt))
	require.NoError(t, err)
	require.Len(t, scalar, 32)
	priv, err := ecdh.P256().NewPrivateKey(scalar)
	require.NoError(t, err)
	require.Equal(t, pub, priv.PublicKey().Bytes())

	// Two first boots never share a keypair.
	other, err := teamconfig.Default(k, "0123abcd", "/srv/svc-files", hash)
	require.NoError(t, err)
	require.NotEqual(t, pubStr, other.WebPush.VAPIDPublicKey)
}

func TestTokenHashFormat(t *testing.T) {
	var h [32]byte
	for i := range h {
		h[i] = byte(i)
	}
	s := teamconfig.FormatTokenHash(h)
	require.Equal(t, "sha256:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", s)
	back, err := teamconfig.ParseTokenHash(s)
	require.NoError(t, err)
	require.Equal(t, h, back)
}

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{name: "letter", in: "a", want: true},
		{name: "digit", in: "7", want: true},
		{name: "all classes", in: "A-z_0.9", want: true},
		{name: "64 chars", in: strings.Repeat("x", 64), want: true},
		{name: "65 chars", in: strings.Repeat("x", 65)},
		{name: "empty", in: ""},
		{name: "leading underscore", in: "_a"},
		{name: "colon", in: "a:b"},
		{name: "space", in: "a b"},
		{name: "trailing newline", in: "a\n"},
		{name: "NUL", in: "a\x00"},
		{name: "unicode", in: "é"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, teamconfig.ValidName(tc.in))
		})
	}
}

func TestTeamIDValidated(t *testing.T) {
	tests := []struct {
		name string
		id   string
		ok   bool
	}{
		{name: "absent", id: `""`, ok: true},
		{name: "hex", id: `"0123456789abcdef0123456789abcdef"`, ok: true},
		{name: "space", id: `"a b"`},
		{name: "too long", id: `"` + strings.Repeat("a", 65) + `"`},
		{name: "not a string", id: `7`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := teamconfig.Parse([]byte(`{"team":{"id":` + tc.id + `,"name":"t"},"store":{"members":[]}}`))
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			if tc.id != "7" {
				require.ErrorContains(t, err, "team.id")
			}
		})
	}
}

func TestNewTeamID(t *testing.T) {
	a, err := teamconfig.NewTeamID()
	require.NoError(t, err)
	b, err := teamconfig.NewTeamID()
	require.NoError(t, err)
	require.Len(t, a, 32)
	require.NotEqual(t, a, b)
}

// sealedConfig is a config with two members, one with a TOTP secret, and
// a web push keypair, all sealed under k.
func sealedConfig(t *testing.T, k *kek.KEK) *teamconfig.File {
	t.Helper()
	_, hash, err := auth.NewToken()
	require.NoError(t, err)
	f, err := teamconfig.Default(k, "id", "/srv/files", hash)
	require.NoError(t, err)
	f.Store.Members = append(f.Store.Members, teamconfig.Member{Name: "ops", Permissions: []string{}})
	f.Store.Members[1].TOTPSecret, err = teamconfig.SealTOTP(k, "ops", "JBSWY3DPEHPK3PXP")
	require.NoError(t, err)
	return f
}

func TestSealedEntries(t *testing.T) {
	k := mustKEK(t)
	f := sealedConfig(t, k)
	var entries []string
	for _, e := range f.Sealed() {
		entries = append(entries, e.Entry)
	}
	require.Equal(t, []string{`store.members[1] ("ops").totpSecret`, "webPush.vapidPrivateKey"}, entries)
	require.NoError(t, f.CheckKEK(k))

	err := f.CheckKEK(mustKEK(t))
	var ee *teamconfig.EntryError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, `store.members[1] ("ops").totpSecret`, ee.Entry, "the first value that does not open is named")
	require.ErrorIs(t, err, kek.ErrDecrypt)

	plain := mustParse(t, `{"team":{"name":"t"},"store":{"members":[{"name":"a","permissions":[],"totpSecret":"JBSWY3DPEHPK3PXP"}]}}`)
	require.Empty(t, plain.Sealed(), "a plaintext value is not sealed yet")
	require.NoError(t, plain.CheckKEK(mustKEK(t)))
}

func TestReseal(t *testing.T) {
	from, to := mustKEK(t), mustKEK(t)
	f := sealedConfig(t, from)
	vapidBefore, err := teamconfig.OpenVAPID(from, f.WebPush)
	require.NoError(t, err)

	n, err := f.Reseal(from, to)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.NoError(t, f.CheckKEK(to))
	require.Error(t, f.CheckKEK(from))
	totp, err := teamconfig.OpenTOTP(to, f.Store.Members[1])
	require.NoError(t, err)
	require.Equal(t, "JBSWY3DPEHPK3PXP", totp)
	vapid, err := teamconfig.OpenVAPID(to, f.WebPush)
	require.NoError(t, err)
	require.Equal(t, vapidBefore, vapid)

	// Run again (an interrupted rotation): what is under to stays.
	n, err = f.Reseal(from, to)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, f.CheckKEK(to))

	// A value neither key opens is named, not dropped.
	_, err = f.Reseal(mustKEK(t), mustKEK(t))
	var ee *teamconfig.EntryError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, `store.members[1] ("ops").totpSecret`, ee.Entry)
}

func TestDropSealed(t *testing.T) {
	lost, fresh := mustKEK(t), mustKEK(t)
	f := sealedConfig(t, lost)
	pub := f.WebPush.VAPIDPublicKey
	dropped, err := f.DropSealed(fresh)
	require.NoError(t, err)
	require.Equal(t, []string{"ops"}, dropped)
	require.False(t, f.Store.Members[1].HasTOTP())
	require.NotEqual(t, pub, f.WebPush.VAPIDPublicKey, "a new keypair")
	require.NoError(t, f.CheckKEK(fresh))
	require.NoError(t, f.Validate())

	nopush := mustParse(t, `{"team":{"name":"t"},"store":{"members":[]}}`)
	dropped, err = nopush.DropSealed(fresh)
	require.NoError(t, err)
	require.Empty(t, dropped)
	require.Nil(t, nopush.WebPush, "no web push block is made")
}
