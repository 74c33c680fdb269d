package redact

import (
	"encoding/base64"
	"encoding/hex"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Redacted replaces every secret and token found.
const Redacted = "[REDACTED]"

// quoted is Redacted as a JSON string, for a match outside a JSON string.
const quoted = `"` + Redacted + `"`

// MinSecretLen is the shortest secret value redacted, in bytes: a shorter
// one (a one-letter value, "test", a PIN) would blank out ordinary text
// wherever it occurs and make every record unreadable. The runner's
// credential floor is the same.
const MinSecretLen = 8

const (
	// TokenPrefix starts every svc bearer token.
	TokenPrefix = "svc_"
	// minTokenBody is the fewest base64url characters after the prefix
	// that make a token: svc mints 43.
	minTokenBody = 16
	// maxViewDepth is how many layers of encoding (JSON escapes,
	// percent-encoding) are looked through.
	maxViewDepth = 2
)

// pattern is one fixed string to find.
type pattern struct {
	s string
	// fold: s is lower case and is searched for in the text with its
	// ASCII letters lowered (Options.Echoes).
	fold bool
	// b64 marks an inner base64 pattern: lead and trail say whether one
	// more alphabet character before and after holds bits of the secret,
	// and '=' padding after it goes too.
	b64         bool
	lead, trail bool
}

// Redactor finds the secrets it was built with, and every svc token, in
// strings. The zero value and nil find tokens only. It is safe for
// concurrent use.
type Redactor struct {
	pats []pattern
	nums []float64 // secrets that are numbers, by value
	// special: a secret holds a character JSON may write as a short
	// escape (a control character, '"', '\\' or '/'), so every escaped
	// string must be looked through, not only those with \u or \/.
	special bool
	// space: a secret holds a space, which '+' stands for in a form.
	space bool
	// wide: a secret holds a byte past ASCII, which \u escapes spell.
	wide bool
	// echoes: Options.Echoes.
	echoes bool
	// folds: some pattern is searched for case-insensitively.
	folds bool
}

// Options widen what a Redactor looks for beyond New's forms.
type Options struct {
	// Echoes also finds each secret the ways an upstream that was sent it
	// may echo it back: in any case of its ASCII letters, reversed (by
	// characters, in any case), hex-encoded (either case), and, in a text
	// that looks like JSON, split across consecutive string values
	// ("abcd", "efgh" for abcdefgh; each piece is redacted in its string).
	// These also apply behind the encodings New looks through.
	Echoes bool
}

// New returns a Redactor of the given secret values. Values shorter than
// MinSecretLen are ignored; a value with white space around it is also
// found without it.
func New(secrets ...string) *Redactor {
	return NewWith(Options{}, secrets...)
}

// NewWith is New with the forms o adds.
func NewWith(o Options, secrets ...string) *Redactor {
	r := &Redactor{echoes: o.Echoes}
	type key struct {
		s    string
		fold bool
	}
	seen := map[key]bool{}
	add := func(p pattern) {
		if !seen[key{p.s, p.fold}] {
			seen[key{p.s, p.fold}] = true
			r.pats = append(r.pats, p)
			r.folds = r.folds || p.fold
		}
	}
	for _, sec := range secrets {
		for _, v := range []string{sec, strings.TrimSpace(sec)} {
			if len(v) < MinSecretLen || seen[key{v, false}] {
				continue
			}
			add(pattern{s: v})
			if o.Echoes {
				add(pattern{s: asciiLower(v), fold: true})
				add(pattern{s: asciiLower(reverse(v)), fold: true})
				add(pattern{s: hex.EncodeToString([]byte(v)), fold: true})
				// Also as written by the usual encoders, so that a '%'
				// just before one (read as an escape with its first
				// two characters) does not hide it from the view.
				add(pattern{s: asciiLower(url.QueryEscape(v)), fold: true})
				add(pattern{s: asciiLower(url.PathEscape(v)), fold: true})
			}
			for k := range 3 {
				for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
					add(b64Pattern(v, k, enc))
				}
			}
			// By value only when the number itself is long: 00000000 is
			// 0, and every 0 would go.
			if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) &&
				len(strconv.FormatFloat(math.Abs(f), 'f', -1, 64)) >= MinSecretLen {
				r.nums = append(r.nums, f)
			}
			if strings.ContainsAny(v, `"\/`) || strings.ContainsFunc(v, isControl) {
				r.special = true
			}
			if strings.Contains(v, " ") {
				r.space = true
			}
			if strings.ContainsFunc(v, func(c rune) bool { return c >= utf8.RuneSelf }) {
				r.wide = true
			}
		}
	}
	// Longer first: at one place the longest match is taken whole.
	slices.SortStableFunc(r.pats, func(a, b pattern) int { return len(b.s) - len(a.s) })
	return r
}

// asciiLower lowers the ASCII letters of s, leaving every other byte (so
// every offset) as it is.
func asciiLower(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r >= 'A' && r <= 'Z' })
	if i < 0 {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if c := b[i]; c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// reverse is s with its characters in the opposite order (bytes that are
// not UTF-8 as single characters).
func reverse(s string) string {
	out := make([]byte, 0, len(s))
	for i := len(s); i > 0; {
		_, n := utf8.DecodeLastRuneInString(s[:i])
		out = append(out, s[i-n:i]...)
		i -= n
	}
	return string(out)
}

// Secrets reports how many patterns r searches besides tokens (for
// tests and metrics).
func (r *Redactor) Secrets() int {
	if r == nil {
		return 0
	}
	return len(r.pats)
}

// b64Pattern is the part of the base64 encoding of v, placed k bytes into
// the encoded data, that depends on v alone: the characters whose six
// bits all come from v.
func b64Pattern(v string, k int, enc *base64.Encoding) pattern {
	buf := make([]byte, k+len(v))
	copy(buf[k:], v)
	e := enc.EncodeToString(buf)
	bits := 8 * (k + len(v))
	first := (8*k + 5) / 6 // the first character after the k bytes' bits
	last := bits/6 - 1     // the last character wholly of v's bits
	return pattern{s: e[first : last+1], b64: true, lead: 8*k%6 != 0, trail: bits%6 != 0}
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func isB64(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_'
}

func isB64URL(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// span is a byte range [a, b) to replace; quote when the replacement
// stands for a JSON value and must be a JSON string.
type span struct {
	a, b  int
	quote bool
}

// String returns s with every secret and token replaced by Redacted; s
// itself when nothing matched. A string that looks like JSON stays JSON.
func (r *Redactor) String(s string) string {
	if r == nil {
		r = &Redactor{}
	}
	// A replacement can make a match of what was around it (a number
	// that only reads as one once its neighbour is gone): redact until
	// nothing matches, a few rounds at most.
	for range maxRounds {
		sp := dropInMarkers(s, r.find(s, 0, nil))
		if len(sp) == 0 {
			break
		}
		sp = merge(sp)
		if looksJSON(s) {
			sp = merge(jsonSafe(s, sp))
		}
		s = apply(s, sp)
	}
	return s
}

// dropInMarkers drops the spans that lie inside a Redacted already in s:
// a secret that is part of the marker (REDACTED, or redacted in any case)
// must not rewrite it round after round.
func dropInMarkers(s string, sp []span) []span {
	if len(sp) == 0 || !strings.Contains(s, Redacted) {
		return sp
	}
	var marks [][2]int
	for i := 0; ; {
		j := strings.Index(s[i:], Redacted)
		if j < 0 {
			break
		}
		marks = append(marks, [2]int{i + j, i + j + len(Redacted)})
		i += j + len(Redacted)
	}
	out := sp[:0]
	for _, x := range sp {
		k, _ := slices.BinarySearchFunc(marks, x.a, func(m [2]int, a int) int {
			if m[1] <= a {
				return -1
			}
			if m[0] > a {
				return 1
			}
			return 0
		})
		if k < len(marks) && marks[k][0] <= x.a && x.b <= marks[k][1] {
			continue
		}
		out = append(out, x)
	}
	return out
}

// maxRounds bounds the rounds of String.
const maxRounds = 4

// Bytes is String for a byte slice; b itself when nothing matched.
func (r *Redactor) Bytes(b []byte) []byte {
	s := string(b)
	out := r.String(s)
	if len(out) == len(s) && out == s {
		return b
	}
	return []byte(out)
}

// find appends the spans of t (at the given view depth) that hold a
// secret or a token.
func (r *Redactor) find(t string, depth int, out []span) []span {
	lower := t
	if r.folds {
		lower = asciiLower(t)
	}
	for _, p := range r.pats {
		first := len(out)
		in := t
		if p.fold {
			in = lower
		}
		for i := 0; i < len(t); {
			j := strings.Index(in[i:], p.s)
			if j < 0 {
				break
			}
			a, b := i+j, i+j+len(p.s)
			if p.b64 {
				if p.lead && a > 0 && isB64(t[a-1]) {
					a--
				}
				if p.trail && b < len(t) && isB64(t[b]) {
					b++
				}
				for n := 0; n < 2 && b < len(t) && t[b] == '='; n++ {
					b++
				}
			}
			// Overlapping matches of one pattern (a periodic secret in a
			// run of its period) make one span, not one each.
			if n := len(out); n > first && a <= out[n-1].b {
				out[n-1].b = max(out[n-1].b, b)
			} else {
				out = append(out, span{a: a, b: b})
			}
			i += j + 1
		}
	}
	out = findTokens(t, out)
	if len(r.nums) > 0 {
		out = r.findNumbers(t, out)
	}
	if depth >= maxViewDepth {
		return out
	}
	for _, d := range decoders {
		if !d.applies(r, t) {
			continue
		}
		v, _ := d.decode(t, false)
		if v == t {
			continue
		}
		sub := r.find(v, depth+1, nil)
		if len(sub) == 0 {
			continue
		}
		_, starts := d.decode(t, true)
		for _, s := range sub {
			if d.pieces {
				out = pieces(starts, s, out)
			} else {
				out = append(out, back(starts, s))
			}
		}
	}
	return out
}

// findTokens appends the spans of svc tokens in t.
func findTokens(t string, out []span) []span {
	for i := 0; i < len(t); {
		j := strings.Index(t[i:], TokenPrefix)
		if j < 0 {
			break
		}
		a := i + j
		b := a + len(TokenPrefix)
		strong := false
		for b < len(t) && isB64URL(t[b]) {
			if c := t[b]; c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
				strong = true
			}
			b++
		}
		if strong && b-a-len(TokenPrefix) >= minTokenBody {
			out = append(out, span{a: a, b: b})
		}
		i = max(b, a+1)
	}
	return out
}

// findNumbers appends the spans of numbers in t whose value is a numeric
// secret's.
func (r *Redactor) findNumbers(t string, out []span) []span {
	isNum := func(c byte) bool {
		return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
	}
	for i := 0; i < len(t); {
		if !isNum(t[i]) {
			i++
			continue
		}
		j, digit := i, false
		for j < len(t) && isNum(t[j]) {
			digit = digit || t[j] >= '0' && t[j] <= '9'
			j++
		}
		if digit {
			if f, err := strconv.ParseFloat(t[i:j], 64); err == nil && slices.Contains(r.nums, f) {
				out = append(out, span{a: i, b: j})
			}
		}
		i = j
	}
	return out
}

// back maps a span of a decoded view onto the text it was decoded from:
// starts[k] is where the unit that gave byte k of the view begins, and a
// span covers every unit it touches whole.
func back(starts []int, s span) span {
	a := starts[s.a]
	last := starts[s.b-1]
	k := s.b
	for starts[k] == last {
		k++
	}
	return span{a: a, b: starts[k]}
}

// pieces maps a span of a view made of pieces of the text copied as they
// are (joinStrings) onto the text: one span for each run of bytes that
// lie next to each other there.
func pieces(starts []int, s span, out []span) []span {
	a := s.a
	for k := s.a + 1; k <= s.b; k++ {
		if k == s.b || starts[k] != starts[k-1]+1 {
			out = append(out, span{a: starts[a], b: starts[k-1] + 1})
			a = k
		}
	}
	return out
}

// merge sorts spans and joins those that overlap or touch.
func merge(sp []span) []span {
	slices.SortFunc(sp, func(x, y span) int { return x.a - y.a })
	out := sp[:0]
	for _, s := range sp {
		if n := len(out); n > 0 && s.a <= out[n-1].b {
			if s.b > out[n-1].b {
				out[n-1].b = s.b
			}
			out[n-1].quote = out[n-1].quote || s.quote
			continue
		}
		out = append(out, s)
	}
	return out
}

// apply replaces each (merged) span of s.
func apply(s string, sp []span) string {
	var sb strings.Builder
	sb.Grow(len(s) + len(sp)*len(quoted))
	at := 0
	for _, x := range sp {
		sb.WriteString(s[at:x.a])
		if x.quote {
			sb.WriteString(quoted)
		} else {
			sb.WriteString(Redacted)
		}
		at = x.b
	}
	sb.WriteString(s[at:])
	return sb.String()
}

// looksJSON reports whether s starts (after white space) as a JSON
// object, array or string does.
func looksJSON(s string) bool {
	t := strings.TrimLeft(s, " \t\r\n")
	return t != "" && (t[0] == '{' || t[0] == '[' || t[0] == '"')
}

// jsonSafe turns spans of a JSON text into spans whose replacement keeps
// it JSON: a span inside one string stays; any other is widened to the
// whole values it touches and replaced by a JSON string. The text need not
// be valid (a truncated body): an unterminated string runs to the end.
func jsonSafe(s string, sp []span) []span {
	strs := stringTokens(s)
	// in returns the string token holding byte i, or -1.
	in := func(i int) int {
		k, _ := slices.BinarySearchFunc(strs, i, func(t [2]int, i int) int {
			switch {
			case t[1] < i:
				return -1
			case t[0] > i:
				return 1
			}
			return 0
		})
		if k < len(strs) && strs[k][0] <= i && i <= strs[k][1] {
			return k
		}
		return -1
	}
	bare := func(c byte) bool {
		return !strings.ContainsRune("{}[],:\" \t\r\n", rune(c))
	}
	out := make([]span, 0, len(sp))
	for _, x := range sp {
		ka, kb := in(x.a), in(x.b-1)
		if ka >= 0 && ka == kb && x.a > strs[ka][0] && x.b-1 < strs[ka][1] {
			// Whole escapes: a match of the raw text may begin or end
			// inside one (the hex digits of \u0030).
			x.a, x.b = escapeBounds(s, strs[ka][0]+1, x.a, x.b)
			out = append(out, x)
			continue
		}
		a, b := x.a, x.b
		if ka >= 0 {
			a = strs[ka][0]
		} else {
			for a > 0 && bare(s[a-1]) {
				a--
			}
		}
		if kb >= 0 {
			b = min(strs[kb][1]+1, len(s))
		} else {
			for b < len(s) && bare(s[b]) {
				b++
			}
		}
		out = append(out, span{a: a, b: b, quote: true})
	}
	return out
}

// escapeBounds widens [a, b), inside the JSON string whose contents start
// at from, so that it neither begins nor ends inside an escape.
func escapeBounds(s string, from, a, b int) (int, int) {
	for i := from; i < b; {
		n := 1
		if s[i] == '\\' && i+1 < len(s) {
			n = 2
			if s[i+1] == 'u' {
				if _, m := hex4(s[i+2:]); m > 0 {
					n = 6
				}
			}
		}
		if i < a && a < i+n {
			a = i
		}
		if i < b && b < i+n {
			b = i + n
		}
		i += n
	}
	return a, b
}

// stringTokens returns the JSON strings of s, each as the index of its
// opening quote and of its closing one (len(s) when unterminated).
func stringTokens(s string) [][2]int {
	var out [][2]int
	for i := 0; i < len(s); i++ {
		if s[i] != '"' {
			continue
		}
		j := i + 1
		for j < len(s) && s[j] != '"' {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		j = min(j, len(s))
		out = append(out, [2]int{i, j})
		i = j
	}
	return out
}

// decoder is one layer of encoding a secret may hide behind.
type decoder struct {
	applies func(r *Redactor, t string) bool
	// decode returns the decoded text and, when asked, where in t each
	// byte of it comes from (one more entry: len(t)).
	decode func(t string, starts bool) (string, []int)
	// pieces: the view is pieces of t copied as they are, so a match in
	// it maps back to one span per piece (pieces), not one around them.
	pieces bool
}

var decoders = []decoder{
	{
		// JSON string escapes, looked through only where they could hide
		// a match (most JSON has escapes: newlines, quotes, terminal
		// colours). The short escapes (\n, \", \\ …) and \u escapes of
		// control characters spell only characters no token or base64
		// pattern holds, and few secrets; \/ spells a base64 character,
		// and other \u escapes anything.
		applies: func(r *Redactor, t string) bool {
			if strings.IndexByte(t, '\\') < 0 {
				return false
			}
			if r.special || strings.Contains(t, `\/`) {
				return true
			}
			for i := 0; ; {
				j := strings.Index(t[i:], `\u`)
				if j < 0 {
					return false
				}
				i += j + 2
				if c, n := hex4(t[i:]); n > 0 && c >= 0x20 && (c < utf8.RuneSelf || r.wide) {
					return true
				}
			}
		},
		decode: unescapeJSON,
	},
	{
		applies: func(_ *Redactor, t string) bool { return hasPercentEscape(t) },
		decode:  func(t string, starts bool) (string, []int) { return unescapePercent(t, false, starts) },
	},
	{
		applies: func(r *Redactor, t string) bool { return r.space && strings.IndexByte(t, '+') >= 0 },
		decode:  func(t string, starts bool) (string, []int) { return unescapePercent(t, true, starts) },
	},
	{
		applies: func(r *Redactor, t string) bool { return r.echoes && looksJSON(t) },
		decode:  joinStrings,
		pieces:  true,
	},
}

// joinStrings is the contents of the JSON string values of t (keys left
// out), as they are written, one after the other: a secret an upstream
// split across consecutive strings reads whole there.
func joinStrings(t string, track bool) (string, []int) {
	b := newBuilder(len(t), track)
	for _, st := range stringTokens(t) {
		// A key is followed by ':'.
		after := strings.TrimLeft(t[min(st[1]+1, len(t)):], " \t\r\n")
		if strings.HasPrefix(after, ":") {
			continue
		}
		b.copy(t, st[0]+1, st[1])
	}
	return b.done(len(t))
}

// builder collects a decoded view and, optionally, its starts.
type builder struct {
	sb     strings.Builder
	starts []int
	track  bool
}

func newBuilder(n int, track bool) *builder {
	b := &builder{track: track}
	b.sb.Grow(n)
	if track {
		b.starts = make([]int, 0, n+1)
	}
	return b
}

// copy takes t[from:to] as it is.
func (b *builder) copy(t string, from, to int) {
	b.sb.WriteString(t[from:to])
	if b.track {
		for i := from; i < to; i++ {
			b.starts = append(b.starts, i)
		}
	}
}

func (b *builder) byte(c byte, from int) {
	b.sb.WriteByte(c)
	if b.track {
		b.starts = append(b.starts, from)
	}
}

func (b *builder) rune(r rune, from int) {
	n := b.sb.Len()
	b.sb.WriteRune(r)
	if b.track {
		for range b.sb.Len() - n {
			b.starts = append(b.starts, from)
		}
	}
}

func (b *builder) done(end int) (string, []int) {
	if b.track {
		b.starts = append(b.starts, end)
	}
	return b.sb.String(), b.starts
}

// unescapeJSON decodes JSON string escapes wherever they occur in t; a
// backslash that starts no valid escape stays as it is.
func unescapeJSON(t string, track bool) (string, []int) {
	b := newBuilder(len(t), track)
	for i := 0; i < len(t); {
		j := strings.IndexByte(t[i:], '\\')
		if j < 0 {
			b.copy(t, i, len(t))
			break
		}
		b.copy(t, i, i+j)
		i += j
		if i+1 >= len(t) {
			b.byte('\\', i)
			i++
			continue
		}
		switch e := t[i+1]; e {
		case '"', '\\', '/':
			b.byte(e, i)
			i += 2
		case 'b', 'f', 'n', 'r', 't':
			b.byte(shortEscapes[e], i)
			i += 2
		case 'u':
			r, n := hex4(t[i+2:])
			if n == 0 {
				b.byte('\\', i)
				i++
				continue
			}
			w := 6
			if r >= 0xd800 && r < 0xdc00 && strings.HasPrefix(t[i+6:], `\u`) {
				if r2, n2 := hex4(t[i+8:]); n2 > 0 && r2 >= 0xdc00 && r2 < 0xe000 {
					r = 0x10000 + (r-0xd800)<<10 + (r2 - 0xdc00)
					w = 12
				}
			}
			if !utf8.ValidRune(r) {
				r = utf8.RuneError
			}
			b.rune(r, i)
			i += w
		default:
			b.byte('\\', i)
			i++
		}
	}
	return b.done(len(t))
}

// shortEscapes are the letters of JSON's one-letter control escapes.
var shortEscapes = [256]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hex4 reads four hex digits; n is 0 when s does not start with them.
func hex4(s string) (rune, int) {
	if len(s) < 4 {
		return 0, 0
	}
	v, err := strconv.ParseUint(s[:4], 16, 32)
	if err != nil {
		return 0, 0
	}
	return rune(v), 4
}

// unescapePercent decodes %XX (either case) in t, and '+' as a space when
// plus is set; a '%' that starts no escape stays.
func unescapePercent(t string, plus, track bool) (string, []int) {
	special := "%"
	if plus {
		special = "%+"
	}
	b := newBuilder(len(t), track)
	for i := 0; i < len(t); {
		j := strings.IndexAny(t[i:], special)
		if j < 0 {
			b.copy(t, i, len(t))
			break
		}
		b.copy(t, i, i+j)
		i += j
		switch c := t[i]; {
		case c == '%' && i+2 < len(t) && unhex(t[i+1]) >= 0 && unhex(t[i+2]) >= 0:
			b.byte(byte(unhex(t[i+1])<<4|unhex(t[i+2])), i)
			i += 3
		case c == '+':
			b.byte(' ', i)
			i++
		default:
			b.byte(c, i)
			i++
		}
	}
	return b.done(len(t))
}

// hasPercentEscape reports whether t holds a %XX escape.
func hasPercentEscape(t string) bool {
	for i := 0; ; {
		j := strings.IndexByte(t[i:], '%')
		if j < 0 {
			return false
		}
		i += j + 1
		if i+1 < len(t) && unhex(t[i]) >= 0 && unhex(t[i+1]) >= 0 {
			return true
		}
	}
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
