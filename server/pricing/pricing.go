package pricing

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
)

// shippedJSON is the price table built into the binary.
//
//go:embed prices.json
var shippedJSON []byte

// OverrideName is the file beside the team config whose models are merged
// over the shipped table.
const OverrideName = "prices.json"

// Bounds of a price file: it is read once at start, but it is input all the
// same.
const (
	maxFileBytes = 1 << 20
	maxModels    = 4096
	maxKeyLen    = 128
	maxPrice     = 100000 // USD per million tokens; far above any list price
	maxTextLen   = 4096   // date, each source, each note
	maxTexts     = 64     // sources, notes
)

// Price is what one million tokens of each kind cost, in USD.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
}

// Rates are a model's prices: Price for every request, and LongContext
// for a request whose prompt is above LongContext.Above tokens, when set.
type Rates struct {
	Price
	LongContext *LongContext
}

// LongContext is the price of a request whose prompt (input, cache read
// and cache write tokens together) is above Above tokens: the whole request
// is billed at it.
type LongContext struct {
	Above int64
	Price
}

// Tokens are the token counts of one request, or a sum of requests of one
// model that are all on the same side of every long-context threshold.
// Input excludes the tokens read from or written to the cache.
type Tokens struct {
	Input, Output, CacheRead, CacheWrite int64
}

// Prompt is the prompt size long-context prices are told by.
func (t Tokens) Prompt() int64 { return t.Input + t.CacheRead + t.CacheWrite }

// Zero reports whether t counts no token at all.
func (t Tokens) Zero() bool { return t == Tokens{} }

// Cost is what t costs at p, in USD.
func (p Price) Cost(t Tokens) float64 {
	return (float64(t.Input)*p.Input + float64(t.Output)*p.Output +
		float64(t.CacheRead)*p.CacheRead + float64(t.CacheWrite)*p.CacheWrite) / 1e6
}

// For returns the price of a request with prompt tokens of prompt.
func (r Rates) For(prompt int64) Price {
	if r.LongContext != nil && prompt > r.LongContext.Above {
		return r.LongContext.Price
	}
	return r.Price
}

// Table is a price table: model ids (or id prefixes) to rates, with where
// the prices come from. A Table is immutable and safe for concurrent use.
type Table struct {
	models map[string]Rates
	// keys are the model keys, longest first, for prefix matching.
	keys []string
	// thresholds are the distinct long-context thresholds, ascending.
	thresholds []int64
	// Date and Sources describe the shipped table; Override names the file
	// merged over it ("" when none) and OverrideModels how many models it
	// set or removed.
	Date           string
	Sources        []string
	Override       string
	OverrideModels int
}

// file is the JSON shape of the shipped table and of an override.
type file struct {
	Schema   int             `json:"schema"`
	Currency string          `json:"currency"`
	Unit     string          `json:"unit"`
	Date     string          `json:"date"`
	Sources  []string        `json:"sources"`
	Notes    []string        `json:"notes"`
	Models   json.RawMessage `json:"models"`
}

type entryJSON struct {
	Input       *float64         `json:"input"`
	Output      *float64         `json:"output"`
	CacheRead   *float64         `json:"cacheRead"`
	CacheWrite  *float64         `json:"cacheWrite"`
	LongContext *longContextJSON `json:"longContext"`
}

type longContextJSON struct {
	Above      *int64   `json:"above"`
	Input      *float64 `json:"input"`
	Output     *float64 `json:"output"`
	CacheRead  *float64 `json:"cacheRead"`
	CacheWrite *float64 `json:"cacheWrite"`
}

// parsed is a decoded price file: models to rates, a nil entry removing
// the model (overrides only).
type parsed struct {
	file
	models map[string]*Rates
	order  []string
}

// keyRE is what a model key may hold once lowercased: model ids and their
// provider decorations ([1m], @date, :0).
var keyRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._:@/\[\]-]*$`)

// Shipped returns the table built into the binary.
func Shipped() *Table {
	p, err := parse(shippedJSON, false)
	if err != nil {
		panic("pricing: shipped table: " + err.Error())
	}
	return build(p, nil)
}

// Load returns the shipped table with the override file at path merged
// over it: each model the file names replaces the shipped one, or is
// removed when the file gives it null. A path that does not exist is no
// override. A file that cannot be read or is not a valid price file is an
// error that names the problem.
func Load(path string) (*Table, error) {
	base, err := parse(shippedJSON, false)
	if err != nil {
		return nil, fmt.Errorf("shipped price table: %w", err)
	}
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return build(base, nil), nil
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s: over %d bytes", path, maxFileBytes)
	}
	over, err := ParseOverride(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t := build(base, over.p)
	t.Override = path
	return t, nil
}

// Override is a parsed override file.
type Override struct{ p *parsed }

// Models returns how many models the override sets or removes.
func (o *Override) Models() int { return len(o.p.order) }

// ParseOverride decodes and validates an override file's bytes: the
// shipped table's schema, each model with all four prices, or null to
// remove it.
func ParseOverride(data []byte) (*Override, error) {
	p, err := parse(data, true)
	if err != nil {
		return nil, err
	}
	return &Override{p: p}, nil
}

func parse(data []byte, override bool) (*parsed, error) {
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("over %d bytes", maxFileBytes)
	}
	var f file
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a price file: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("not a price file: data after the object")
	}
	if f.Schema != 1 {
		return nil, fmt.Errorf("schema: must be 1, not %d", f.Schema)
	}
	if f.Currency != "" && f.Currency != "USD" {
		return nil, fmt.Errorf("currency: must be USD, not %q", f.Currency)
	}
	if len(f.Sources) > maxTexts || len(f.Notes) > maxTexts {
		return nil, fmt.Errorf("sources, notes: at most %d each", maxTexts)
	}
	for _, s := range append(append([]string{f.Date, f.Unit}, f.Sources...), f.Notes...) {
		if len(s) > maxTextLen {
			return nil, fmt.Errorf("date, unit, sources, notes: at most %d bytes each", maxTextLen)
		}
	}
	if len(bytes.TrimSpace(f.Models)) == 0 || string(bytes.TrimSpace(f.Models)) == "null" {
		return nil, errors.New("models: is required: an object of model id to prices")
	}
	p := &parsed{file: f, models: map[string]*Rates{}}
	if err := p.decodeModels(f.Models, override); err != nil {
		return nil, err
	}
	return p, nil
}

// decodeModels reads the models object key by key, so a model named twice
// (JSON decoders keep the last one silently) is refused.
func (p *parsed) decodeModels(raw json.RawMessage, override bool) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("models: must be an object of model id to prices")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("models: %w", err)
		}
		name, _ := tok.(string)
		key := strings.ToLower(name)
		if len(key) == 0 || len(key) > maxKeyLen || !keyRE.MatchString(key) {
			return fmt.Errorf("models: %q is not a model id (1 to %d characters: letters, digits, . _ : @ / [ ] -, starting with a letter or digit)", name, maxKeyLen)
		}
		if _, dup := p.models[key]; dup {
			return fmt.Errorf("models: %q is named twice", name)
		}
		if len(p.models) >= maxModels {
			return fmt.Errorf("models: at most %d", maxModels)
		}
		field := fmt.Sprintf("models[%q]", name)
		var rawEntry json.RawMessage
		if err := dec.Decode(&rawEntry); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		var e *entryJSON
		vdec := json.NewDecoder(bytes.NewReader(rawEntry))
		vdec.DisallowUnknownFields()
		if err := vdec.Decode(&e); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		if e == nil {
			if !override {
				return fmt.Errorf("%s: null removes a model, which only an override may do", field)
			}
			p.models[key] = nil
			p.order = append(p.order, key)
			continue
		}
		r, err := e.rates(field)
		if err != nil {
			return err
		}
		p.models[key] = &r
		p.order = append(p.order, key)
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("models: %w", err)
	}
	return nil
}

func (e *entryJSON) rates(field string) (Rates, error) {
	var r Rates
	var err error
	if r.Price, err = price(field, e.Input, e.Output, e.CacheRead, e.CacheWrite); err != nil {
		return r, err
	}
	if lc := e.LongContext; lc != nil {
		field += ".longContext"
		if lc.Above == nil || *lc.Above < 1 || *lc.Above > 1e9 {
			return r, fmt.Errorf("%s.above: is required: the prompt tokens above which these prices apply (1 to 10^9)", field)
		}
		p, err := price(field, lc.Input, lc.Output, lc.CacheRead, lc.CacheWrite)
		if err != nil {
			return r, err
		}
		r.LongContext = &LongContext{Above: *lc.Above, Price: p}
	}
	return r, nil
}

func price(field string, in, out, cr, cw *float64) (Price, error) {
	vals := []struct {
		name string
		v    *float64
	}{{"input", in}, {"output", out}, {"cacheRead", cr}, {"cacheWrite", cw}}
	for _, x := range vals {
		if x.v == nil {
			return Price{}, fmt.Errorf("%s.%s: is required (USD per million tokens; a provider that charges no cache write bills those tokens as input)", field, x.name)
		}
		if math.IsNaN(*x.v) || *x.v < 0 || *x.v > maxPrice {
			return Price{}, fmt.Errorf("%s.%s: must be 0 to %d", field, x.name, maxPrice)
		}
	}
	return Price{Input: *in, Output: *out, CacheRead: *cr, CacheWrite: *cw}, nil
}

// build makes a table of base with over merged over it.
func build(base, over *parsed) *Table {
	t := &Table{models: map[string]Rates{}, Date: base.Date, Sources: slices.Clone(base.Sources)}
	for k, r := range base.models {
		t.models[k] = *r
	}
	if over != nil {
		for _, k := range over.order {
			if r := over.models[k]; r == nil {
				delete(t.models, k)
			} else {
				t.models[k] = *r
			}
		}
		t.OverrideModels = len(over.order)
	}
	for k, r := range t.models {
		t.keys = append(t.keys, k)
		if r.LongContext != nil && !slices.Contains(t.thresholds, r.LongContext.Above) {
			t.thresholds = append(t.thresholds, r.LongContext.Above)
		}
	}
	slices.SortFunc(t.keys, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	slices.Sort(t.thresholds)
	return t
}

// Len is how many models the table prices.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.models)
}

// Thresholds are the table's distinct long-context thresholds, ascending:
// sums of requests on the same side of each of them can be priced as one.
func (t *Table) Thresholds() []int64 {
	if t == nil {
		return nil
	}
	return slices.Clone(t.thresholds)
}

// snapshotRE is what may follow a key for it to price a longer model id:
// snapshot and deployment decorations of the same model (dates, -latest,
// Bedrock's -v1:0, Vertex's @date, a context tag like [1m]), never a
// version or variant of another model.
var snapshotRE = regexp.MustCompile(`^(-\d{8}|-\d{4}-\d{2}-\d{2}|-latest|-v\d+(:\d+)?|@[a-z0-9._-]+|\[[a-z0-9._-]+\])+$`)

// Lookup finds the rates of a model id: the key equal to it (case does not
// matter), else the longest key it starts with that is followed only by a
// snapshot suffix (claude-sonnet-4-5-20250929 is claude-sonnet-4-5;
// claude-opus-4-9 is not claude-opus-4, nor gpt-5.7 gpt-5). It returns the
// key that matched.
func (t *Table) Lookup(model string) (key string, r Rates, ok bool) {
	if t == nil {
		return "", Rates{}, false
	}
	id := strings.ToLower(strings.TrimSpace(model))
	if id == "" {
		return "", Rates{}, false
	}
	if r, ok := t.models[id]; ok {
		return id, r, true
	}
	for _, k := range t.keys {
		if len(k) < len(id) && strings.HasPrefix(id, k) && snapshotRE.MatchString(id[len(k):]) {
			return k, t.models[k], true
		}
	}
	return "", Rates{}, false
}

// Cost prices the tokens of one request of model; ok is false when the
// table has no price for the model.
func (t *Table) Cost(model string, tok Tokens) (cost float64, ok bool) {
	_, r, ok := t.Lookup(model)
	if !ok {
		return 0, false
	}
	return r.For(tok.Prompt()).Cost(tok), true
}

// Bucket is which of the table's thresholds a prompt of prompt tokens is
// above: how many of them are below it. Requests in one bucket are on the
// same side of every long-context threshold, so their sum prices as one.
func (t *Table) Bucket(prompt int64) int {
	if t == nil {
		return 0
	}
	n := 0
	for _, th := range t.thresholds {
		if prompt > th {
			n++
		}
	}
	return n
}

// CostSum prices tok, the sum of requests of model whose prompts all fall
// in bucket (Bucket); ok is false when the table has no price for the
// model.
func (t *Table) CostSum(model string, bucket int, tok Tokens) (cost float64, ok bool) {
	_, r, ok := t.Lookup(model)
	if !ok {
		return 0, false
	}
	p := r.Price
	if lc := r.LongContext; lc != nil && bucket > slices.Index(t.thresholds, lc.Above) {
		p = lc.Price
	}
	return p.Cost(tok), true
}
