// Package teamconfig reads, validates, migrates and atomically writes the
// team config file, the authority for members and team settings.
package teamconfig

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"svc/server/auth"
	"svc/server/kek"
)

// DefaultMaxFileSize is files.maxFileSize when unset: 64 MiB
// (docs/DECISIONS.md, Filesystem).
const DefaultMaxFileSize = 64 << 20

// File is the team config file.
type File struct {
	Team    Team     `json:"team"`
	Store   Store    `json:"store"`
	HTTPS   *HTTPS   `json:"https,omitempty"`
	WebPush *WebPush `json:"webPush,omitempty"`
	JWT     *JWT     `json:"jwt,omitempty"`
	Files   *Files   `json:"files,omitempty"`
	// Approvals holds the approvals settings (docs/APPROVALS.md).
	Approvals *Approvals `json:"approvals,omitempty"`
	// LoopGuard holds the loop guard's settings (docs/RUNNER.md, Loop
	// guard); absent fields take their defaults.
	LoopGuard *LoopGuard `json:"loopGuard,omitempty"`

	// extra keeps top-level keys this version does not know, so rewriting
	// the file never drops an operator's settings.
	extra map[string]json.RawMessage
}

// Team is the team block.
type Team struct {
	// ID names the team's data: the store records the same id, and a
	// broker refuses to pair a config with a store of another team. The
	// broker writes it at first boot (or at the first start of a config
	// without one on a database); operators never need to.
	ID                string              `json:"id,omitempty"`
	Name              string              `json:"name"`
	Directive         string              `json:"directive"`
	Context           string              `json:"context"`
	PermissionPresets map[string][]string `json:"permissionPresets"`
}

// Store holds the member entries.
type Store struct {
	Members []Member `json:"members"`
	// MembersInDatabase says the members live in the database, not here:
	// brokers that share one team over NATS keep them there, and the file
	// then holds none (docs/DECISIONS.md, "Members in the database when
	// brokers share a team").
	MembersInDatabase bool `json:"membersInDatabase,omitempty"`
}

// Role is a member's title and description.
type Role struct {
	Title       string `json:"title"`
	Description string `json:"description"`
}

// Member is one member entry.
type Member struct {
	// ID names this member apart from any earlier or later member of the
	// same name: activity, inference records and objectives remember it,
	// so a name deleted and created again is a new member. The broker
	// writes it (at creation, or at the first start of a config without
	// one); operators never need to.
	ID             string          `json:"id,omitempty"`
	Name           string          `json:"name"`
	Role           *Role           `json:"role"`
	Instructions   string          `json:"instructions,omitempty"`
	Permissions    []string        `json:"permissions"`
	RawPermissions []string        `json:"rawPermissions,omitempty"`
	TokenHash      string          `json:"tokenHash,omitempty"`
	Token          string          `json:"token,omitempty"`      // plaintext; migrated to TokenHash at boot
	TOTPSecret     json.RawMessage `json:"totpSecret,omitempty"` // base32 string (migrated) or kek.Sealed
	// Approvers are the members the team names as this member's
	// approvers: they may decide its approvals (docs/APPROVALS.md).
	Approvers []string `json:"approvers,omitempty"`
}

// MaxApprovers bounds one member's list of named approvers.
const MaxApprovers = 64

// Approvals are the team's approvals settings.
type Approvals struct {
	// ExpireAfter is how long a pending approval waits for a decision
	// before it expires as denied: a Go duration ("15m", "90s"), 1s to
	// 24h; absent is DefaultApprovalExpiry.
	ExpireAfter string `json:"expireAfter,omitempty"`
}

// Bounds of approvals.expireAfter. A day is the longest an agent's turn can
// sensibly wait on a person; the runner's tool calls are sized to it.
const (
	DefaultApprovalExpiry = 15 * time.Minute
	MinApprovalExpiry     = time.Second
	MaxApprovalExpiry     = 24 * time.Hour
)

// ApprovalExpiry is approvals.expireAfter, or the default.
func (f *File) ApprovalExpiry() time.Duration {
	if f.Approvals == nil || f.Approvals.ExpireAfter == "" {
		return DefaultApprovalExpiry
	}
	d, err := time.ParseDuration(f.Approvals.ExpireAfter)
	if err != nil {
		return DefaultApprovalExpiry // Validate refuses it first
	}
	return d
}

// DropApprover removes name from every member's approvers: a deleted
// member's name must not make a member created later under that name an
// approver.
func (f *File) DropApprover(name string) {
	for i := range f.Store.Members {
		m := &f.Store.Members[i]
		m.Approvers = slices.DeleteFunc(m.Approvers, func(a string) bool { return a == name })
		if len(m.Approvers) == 0 {
			m.Approvers = nil
		}
	}
}

// HTTPS enables a TLS listener.
type HTTPS struct {
	Port int    `json:"port"`
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

// WebPush holds the VAPID keypair; the private key is sealed under the KEK.
type WebPush struct {
	VAPIDPublicKey  string          `json:"vapidPublicKey"`
	VAPIDPrivateKey json.RawMessage `json:"vapidPrivateKey"`
}

// JWT configures federation tokens.
type JWT struct {
	Issuer   string `json:"issuer"`
	Audience string `json:"audience"`
	JWKSURL  string `json:"jwksUrl"`
}

// Files configures the virtual filesystem.
type Files struct {
	Root        string `json:"root"`
	MaxFileSize int64  `json:"maxFileSize,omitempty"`
	// QuotaBytes bounds the bytes of the files in one member's home; 0 or
	// absent is unlimited.
	QuotaBytes int64 `json:"quotaBytes,omitempty"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidName reports whether s is a valid member name.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// EntryError names the config entry that is wrong.
type EntryError struct {
	Entry string
	Err   error
}

func (e *EntryError) Error() string { return e.Entry + ": " + e.Err.Error() }
func (e *EntryError) Unwrap() error { return e.Err }

func entryErr(entry string, format string, args ...any) error {
	return &EntryError{Entry: entry, Err: fmt.Errorf(format, args...)}
}

// knownKeys are the top-level keys of File.
var knownKeys = []string{"team", "store", "https", "webPush", "jwt", "files", "approvals", "loopGuard"}

// Parse decodes and validates a config file's bytes. It does not migrate.
func Parse(data []byte) (*File, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("config is not a JSON object: %w", err)
	}
	if raw == nil { // the JSON literal null
		return nil, errors.New("config is not a JSON object")
	}
	f := &File{}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(f); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	for k, v := range raw {
		// encoding/json fills the known blocks from keys that match them
		// case-insensitively ("Store", "ſtore"); keeping such a key as an
		// extra too would let its stale copy override the block on the next
		// read of what Marshal wrote.
		if slices.ContainsFunc(knownKeys, func(known string) bool { return strings.EqualFold(k, known) }) {
			continue
		}
		if f.extra == nil {
			f.extra = map[string]json.RawMessage{}
		}
		f.extra[k] = v
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// Load reads and validates the file at path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Presets returns the team's presets, or the defaults when none are set.
func (f *File) Presets() map[string][]string {
	if f.Team.PermissionPresets == nil {
		return auth.DefaultPresets()
	}
	return f.Team.PermissionPresets
}

// MemberIndex returns the index of the named member entry, or -1.
func (f *File) MemberIndex(name string) int {
	return slices.IndexFunc(f.Store.Members, func(m Member) bool { return m.Name == name })
}

// HasManager reports whether any member holds members.manage.
func (f *File) HasManager() bool {
	for _, m := range f.Store.Members {
		if slices.Contains(m.Permissions, auth.MembersManage) {
			return true
		}
	}
	return false
}

// teamIDRE is what a team id may be: NewTeamID makes 32 hex digits; a
// hand-copied id is bounded and printable.
var teamIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Validate checks every entry and names the first offending one.
func (f *File) Validate() error {
	if f.Team.ID != "" && !teamIDRE.MatchString(f.Team.ID) {
		return entryErr("team.id", "must be 1 to 64 letters, digits, '-' or '_'")
	}
	for name, leaves := range f.Team.PermissionPresets {
		entry := fmt.Sprintf("team.permissionPresets[%q]", name)
		if auth.IsLeaf(name) {
			return entryErr(entry, "a preset may not be named like a permission leaf")
		}
		if leaves == nil {
			return entryErr(entry, "must be a list of permission leaves")
		}
		for _, l := range leaves {
			if !auth.IsLeaf(l) {
				return entryErr(entry, "unknown permission leaf %q", l)
			}
		}
	}
	presets := f.Presets()
	seen := map[string]bool{}
	seenID := map[string]bool{}
	for i, m := range f.Store.Members {
		entry := fmt.Sprintf("store.members[%d] (%q)", i, m.Name)
		if !ValidName(m.Name) {
			return entryErr(entry, "malformed member name")
		}
		if seen[m.Name] {
			return entryErr(entry, "duplicate member name")
		}
		seen[m.Name] = true
		if m.ID != "" {
			if !teamIDRE.MatchString(m.ID) {
				return entryErr(entry+".id", "must be 1 to 64 letters, digits, '-' or '_'")
			}
			if seenID[m.ID] {
				return entryErr(entry+".id", "is another member's id too")
			}
			seenID[m.ID] = true
		}
		for _, list := range [][]string{m.Permissions, m.RawPermissions} {
			if _, err := auth.Resolve(list, presets); err != nil {
				return entryErr(entry, "%w", err)
			}
		}
		if m.TokenHash != "" {
			if _, err := ParseTokenHash(m.TokenHash); err != nil {
				return entryErr(entry+".tokenHash", "%w", err)
			}
		}
		if m.Token != "" {
			if _, err := auth.ParseToken(m.Token); err != nil {
				return entryErr(entry+".token", "%w", err)
			}
		}
		if len(m.TOTPSecret) > 0 && string(m.TOTPSecret) != "null" {
			if _, _, err := m.totp(); err != nil {
				return entryErr(entry+".totpSecret", "%w", err)
			}
		}
	}
	for i, m := range f.Store.Members {
		entry := fmt.Sprintf("store.members[%d] (%q).approvers", i, m.Name)
		if err := validApprovers(m.Name, m.Approvers, seen); err != nil {
			return entryErr(entry, "%w", err)
		}
	}
	if a := f.Approvals; a != nil && a.ExpireAfter != "" {
		d, err := time.ParseDuration(a.ExpireAfter)
		if err != nil || d < MinApprovalExpiry || d > MaxApprovalExpiry {
			return entryErr("approvals.expireAfter", "must be a duration from %s to %s (like \"15m\")", MinApprovalExpiry, MaxApprovalExpiry)
		}
	}
	if h := f.HTTPS; h != nil {
		if h.Port < 1 || h.Port > 65535 {
			return entryErr("https.port", "must be 1 to 65535")
		}
		if h.Cert == "" || h.Key == "" {
			return entryErr("https", "cert and key are required")
		}
	}
	if f.Files != nil && f.Files.MaxFileSize < 0 {
		return entryErr("files.maxFileSize", "must not be negative")
	}
	if f.Files != nil && f.Files.QuotaBytes < 0 {
		return entryErr("files.quotaBytes", "must not be negative")
	}
	if f.LoopGuard != nil {
		if err := f.LoopGuard.validate(); err != nil {
			return err
		}
	}
	if f.JWT != nil {
		if err := f.JWT.Validate(); err != nil {
			return entryErr("jwt", "%w", err)
		}
	}
	if f.WebPush != nil && len(f.WebPush.VAPIDPrivateKey) > 0 {
		if _, _, err := decodeSecretField(f.WebPush.VAPIDPrivateKey); err != nil {
			return entryErr("webPush.vapidPrivateKey", "%w", err)
		}
	}
	return nil
}

// validApprovers checks a member's named approvers: members of the team
// (known), other than the member itself, each once, at most MaxApprovers.
func validApprovers(self string, approvers []string, known map[string]bool) error {
	if len(approvers) > MaxApprovers {
		return fmt.Errorf("at most %d names", MaxApprovers)
	}
	seen := map[string]bool{}
	for _, a := range approvers {
		switch {
		case !known[a]:
			return fmt.Errorf("no member %q", a)
		case a == self:
			return errors.New("a member cannot approve its own requests")
		case seen[a]:
			return fmt.Errorf("%q named twice", a)
		}
		seen[a] = true
	}
	return nil
}

// totp returns the member's TOTP secret field: plaintext base32 (needs
// migration) or sealed.
func (m Member) totp() (plain string, sealed *kek.Sealed, err error) {
	plain, sealed, err = decodeSecretField(m.TOTPSecret)
	if err != nil {
		return "", nil, err
	}
	if plain != "" {
		if _, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(strings.ToUpper(strings.TrimRight(plain, "="))); err != nil {
			return "", nil, errors.New("plaintext TOTP secret is not base32")
		}
	}
	return plain, sealed, nil
}

// HasTOTP reports whether the member has a TOTP secret bound.
func (m Member) HasTOTP() bool {
	return len(m.TOTPSecret) > 0 && string(m.TOTPSecret) != "null"
}

// SealedTOTP returns the member's sealed TOTP secret, if migrated.
func (m Member) SealedTOTP() (*kek.Sealed, bool) {
	_, s, err := m.totp()
	return s, err == nil && s != nil
}

// decodeSecretField reads a field that is either a plaintext string or a
// sealed {v, ct, iv} object.
func decodeSecretField(raw json.RawMessage) (string, *kek.Sealed, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, err
		}
		if s == "" {
			return "", nil, errors.New("empty secret")
		}
		return s, nil, nil
	}
	var s kek.Sealed
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return "", nil, errors.New("must be a string or an encrypted {v, ct, iv} object")
	}
	if s.V != kek.Version || s.CT == "" || s.IV == "" {
		return "", nil, fmt.Errorf("encrypted value needs v=%d, ct and iv", kek.Version)
	}
	return "", &s, nil
}

// TOTPPurpose is the additional data a member's TOTP secret is sealed with.
func TOTPPurpose(member string) string { return "svc/totp/" + member }

// VAPIDPurpose is the additional data of the VAPID private key.
const VAPIDPurpose = "svc/webpush/vapid"

// ErrNoKEK means a plaintext secret must be migrated but no KEK is active.
var ErrNoKEK = errors.New("no active KEK")

// Migrate resolves presets to leaves, moves plaintext secrets to their
// hashed or sealed form and gives each member without an id one. It
// reports whether the file changed and must be written back.
func (f *File) Migrate(k *kek.KEK) (changed bool, err error) {
	presets := f.Presets()
	for i := range f.Store.Members {
		m := &f.Store.Members[i]
		entry := fmt.Sprintf("store.members[%d] (%q)", i, m.Name)
		if m.ID == "" {
			if m.ID, err = NewMemberID(); err != nil {
				return false, err
			}
			changed = true
		}
		if m.Permissions == nil && m.RawPermissions != nil {
			if m.Permissions, err = auth.Resolve(m.RawPermissions, presets); err != nil {
				return false, entryErr(entry, "%w", err)
			}
			changed = true
		} else if auth.HasPreset(m.Permissions) {
			if m.RawPermissions == nil {
				m.RawPermissions = slices.Clone(m.Permissions)
			}
			if m.Permissions, err = auth.Resolve(m.Permissions, presets); err != nil {
				return false, entryErr(entry, "%w", err)
			}
			changed = true
		} else if m.Permissions == nil {
			m.Permissions = []string{}
		}
		if m.Token != "" {
			m.TokenHash = FormatTokenHash(auth.HashToken(m.Token))
			m.Token = ""
			changed = true
		}
		plain, _, err := m.totp()
		if err != nil {
			return false, entryErr(entry+".totpSecret", "%w", err)
		}
		if plain != "" {
			if k == nil {
				return false, entryErr(entry+".totpSecret", "%w", ErrNoKEK)
			}
			sealed, err := SealTOTP(k, m.Name, plain)
			if err != nil {
				return false, err
			}
			m.TOTPSecret = sealed
			changed = true
		}
	}
	if f.WebPush != nil {
		plain, _, err := decodeSecretField(f.WebPush.VAPIDPrivateKey)
		if err != nil {
			return false, entryErr("webPush.vapidPrivateKey", "%w", err)
		}
		if plain != "" {
			if k == nil {
				return false, entryErr("webPush.vapidPrivateKey", "%w", ErrNoKEK)
			}
			s, err := k.Seal([]byte(plain), VAPIDPurpose)
			if err != nil {
				return false, err
			}
			if f.WebPush.VAPIDPrivateKey, err = json.Marshal(s); err != nil {
				return false, err
			}
			changed = true
		}
	}
	return changed, nil
}

// SealTOTP seals a base32 TOTP secret for member and returns the JSON field.
func SealTOTP(k *kek.KEK, member, secret string) (json.RawMessage, error) {
	s, err := k.Seal([]byte(secret), TOTPPurpose(member))
	if err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

// OpenTOTP returns the member's base32 TOTP secret.
func OpenTOTP(k *kek.KEK, m Member) (string, error) {
	s, ok := m.SealedTOTP()
	if !ok {
		return "", errors.New("no sealed TOTP secret")
	}
	pt, err := k.Open(*s, TOTPPurpose(m.Name))
	if err != nil {
		return "", err
	}
	return string(pt), nil
}

// OpenVAPID returns the VAPID private key of w (base64url of the scalar),
// opening it with k.
func OpenVAPID(k *kek.KEK, w *WebPush) (string, error) {
	plain, sealed, err := decodeSecretField(w.VAPIDPrivateKey)
	if err != nil {
		return "", fmt.Errorf("webPush.vapidPrivateKey: %w", err)
	}
	if sealed == nil {
		return plain, nil
	}
	if k == nil {
		return "", ErrNoKEK
	}
	b, err := k.Open(*sealed, VAPIDPurpose)
	if err != nil {
		return "", fmt.Errorf("webPush.vapidPrivateKey: %w", err)
	}
	return string(b), nil
}

// FormatTokenHash renders a token hash as sha256:<hex>.
func FormatTokenHash(h [32]byte) string { return "sha256:" + hex.EncodeToString(h[:]) }

// ParseTokenHash parses sha256:<64 hex>.
func ParseTokenHash(s string) ([32]byte, error) {
	var h [32]byte
	hexPart, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hexPart) != 64 {
		return h, errors.New("token hash must be sha256:<64 hex digits>")
	}
	b, err := hex.DecodeString(hexPart)
	if err != nil {
		return h, errors.New("token hash must be sha256:<64 hex digits>")
	}
	copy(h[:], b)
	return h, nil
}

// NewTeamID returns a fresh random team id.
func NewTeamID() (string, error) { return randomID() }

// NewMemberID returns a fresh member id: 32 hex digits.
func NewMemberID() (string, error) { return randomID() }

func randomID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// NewWebPush returns a fresh VAPID keypair, the private key sealed under k.
func NewWebPush(k *kek.KEK) (*WebPush, error) {
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	sealed, err := k.Seal([]byte(base64.RawURLEncoding.EncodeToString(priv.Bytes())), VAPIDPurpose)
	if err != nil {
		return nil, err
	}
	sealedJSON, err := json.Marshal(sealed)
	if err != nil {
		return nil, err
	}
	return &WebPush{
		VAPIDPublicKey:  base64.RawURLEncoding.EncodeToString(priv.PublicKey().Bytes()),
		VAPIDPrivateKey: sealedJSON,
	}, nil
}

// Default returns the first-boot config: team "team" with id teamID, the
// default presets, a files block rooted in filesRoot, a fresh VAPID
// keypair sealed under k, and one admin member holding tokenHash.
func Default(k *kek.KEK, teamID, filesRoot string, tokenHash [32]byte) (*File, error) {
	wp, err := NewWebPush(k)
	if err != nil {
		return nil, err
	}
	presets := auth.DefaultPresets()
	id, err := NewMemberID()
	if err != nil {
		return nil, err
	}
	return &File{
		Team: Team{ID: teamID, Name: "team", PermissionPresets: presets},
		Store: Store{Members: []Member{{
			ID:             id,
			Name:           "admin",
			Role:           &Role{Title: "Administrator", Description: "Runs the team broker."},
			Permissions:    slices.Clone(presets["admin"]),
			RawPermissions: []string{"admin"},
			TokenHash:      FormatTokenHash(tokenHash),
		}}},
		WebPush: wp,
		Files:   &Files{Root: filesRoot, MaxFileSize: DefaultMaxFileSize},
	}, nil
}

// SealedEntry is one value of the config sealed under the KEK.
type SealedEntry struct {
	Entry   string // the config entry, as errors name it
	Sealed  kek.Sealed
	Purpose string
	// set stores a value sealed again.
	set func(json.RawMessage)
}

// Sealed lists the config's sealed values: members' TOTP secrets and the
// VAPID private key. Plaintext values (migrated at boot) are not listed.
func (f *File) Sealed() []SealedEntry {
	var out []SealedEntry
	for i := range f.Store.Members {
		m := &f.Store.Members[i]
		if s, ok := m.SealedTOTP(); ok {
			out = append(out, SealedEntry{
				Entry: fmt.Sprintf("store.members[%d] (%q).totpSecret", i, m.Name), Sealed: *s, Purpose: TOTPPurpose(m.Name),
				set: func(v json.RawMessage) { m.TOTPSecret = v },
			})
		}
	}
	if w := f.WebPush; w != nil {
		if _, s, err := decodeSecretField(w.VAPIDPrivateKey); err == nil && s != nil {
			out = append(out, SealedEntry{
				Entry: "webPush.vapidPrivateKey", Sealed: *s, Purpose: VAPIDPurpose,
				set: func(v json.RawMessage) { w.VAPIDPrivateKey = v },
			})
		}
	}
	return out
}

// CheckKEK opens every sealed value with k and names the first that does
// not open.
func (f *File) CheckKEK(k *kek.KEK) error {
	for _, e := range f.Sealed() {
		if _, err := k.Open(e.Sealed, e.Purpose); err != nil {
			return &EntryError{Entry: e.Entry, Err: err}
		}
	}
	return nil
}

// Reseal seals every sealed value again under to. A value opens with from;
// one that opens with to instead is already re-sealed (a rotation that was
// interrupted) and is left as it is. It reports how many it re-sealed and
// names the first value neither key opens.
func (f *File) Reseal(from, to *kek.KEK) (int, error) {
	n := 0
	for _, e := range f.Sealed() {
		pt, err := from.Open(e.Sealed, e.Purpose)
		if err != nil {
			if _, terr := to.Open(e.Sealed, e.Purpose); terr == nil {
				continue
			}
			return n, &EntryError{Entry: e.Entry, Err: err}
		}
		s, err := to.Seal(pt, e.Purpose)
		if err != nil {
			return n, err
		}
		raw, err := json.Marshal(s)
		if err != nil {
			return n, err
		}
		e.set(raw)
		n++
	}
	return n, nil
}

// DropSealed gives up what a lost KEK sealed: members' TOTP secrets go
// (they enroll again) and the web push keypair, when there is one, is
// replaced by a fresh one sealed under k. It returns the members whose
// TOTP secret went.
func (f *File) DropSealed(k *kek.KEK) ([]string, error) {
	var dropped []string
	for i := range f.Store.Members {
		m := &f.Store.Members[i]
		if m.HasTOTP() {
			m.TOTPSecret = nil
			dropped = append(dropped, m.Name)
		}
	}
	if f.WebPush != nil {
		wp, err := NewWebPush(k)
		if err != nil {
			return nil, err
		}
		f.WebPush = wp
	}
	return dropped, nil
}

// Marshal renders the file as indented JSON, keeping unknown top-level keys.
func (f *File) Marshal() ([]byte, error) {
	known, err := json.Marshal(struct {
		Team      Team       `json:"team"`
		Store     Store      `json:"store"`
		HTTPS     *HTTPS     `json:"https,omitempty"`
		WebPush   *WebPush   `json:"webPush,omitempty"`
		JWT       *JWT       `json:"jwt,omitempty"`
		Files     *Files     `json:"files,omitempty"`
		Approvals *Approvals `json:"approvals,omitempty"`
		// The file keeps the loopGuard block a rewrite (a member change)
		// must not drop.
		LoopGuard *LoopGuard `json:"loopGuard,omitempty"`
	}{f.Team, f.Store, f.HTTPS, f.WebPush, f.JWT, f.Files, f.Approvals, f.LoopGuard})
	if err != nil {
		return nil, err
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(known, &out); err != nil {
		return nil, err
	}
	for k, v := range f.extra {
		out[k] = v
	}
	return json.MarshalIndent(out, "", "  ")
}

// Save writes the file atomically: a 0600 temp file in the same 0700
// directory, fsync, rename, fsync of the directory. A crash leaves either the
// old or the new file, never a torn one.
func Save(path string, f *File) error {
	data, err := f.Marshal()
	if err != nil {
		return err
	}
	return writeAtomic(path, append(data, '\n'))
}

// writeAtomic writes data to path as Save describes.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
