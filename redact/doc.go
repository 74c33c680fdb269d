// Package redact replaces secret values and svc bearer tokens by
// [REDACTED] in text and JSON, before telemetry is stored: the one engine
// the broker's ingest paths and the runner share (docs/TELEMETRY.md,
// "Redaction at ingest"). It imports nothing of svc's, so the runner, which
// may never import the server, uses it too.
//
// A Redactor is built once per member from the secret values it may use
// and finds, in any string:
//
//   - each secret of at least MinSecretLen bytes (and its form without
//     surrounding white space), as it is;
//   - its base64 encodings, standard and URL alphabets, padded or not,
//     also inside a longer base64 text at any of the three byte offsets
//     (the characters that hold only the secret's bits are searched, and
//     the one or two characters that mix them with the neighbours' bits
//     are redacted with them);
//   - a numeric secret as a number of the same value (1.2345678e7 for
//     12345678);
//   - every svc_ bearer token: svc_ followed by at least 16 base64url
//     characters, at least one of them an upper-case letter, a digit or
//     '-' (every token svc mints; svc_otlp_records_total is a metric name,
//     not a token);
//   - all of the above behind one or two layers of encoding: JSON string
//     escapes (\u0073, \/, \" …, also a JSON document quoted inside a
//     JSON string) and percent-encoding (%2B or %2b; '+' for a space when
//     a secret holds one), in any order.
//
// NewWith(Options{Echoes: true}, …) also finds what an upstream that was
// sent a secret may echo back: the secret in any case of its ASCII
// letters, reversed, hex-encoded, URL-encoded as the usual encoders write
// it, and split across consecutive JSON string values (the tool-call
// path, docs/TOOLCALL.md; telemetry keeps New's forms and cost).
//
// A string that looks like JSON (it starts with '{', '[' or '"') is
// rewritten so that it stays JSON: a match inside a string becomes
// [REDACTED] inside that string, a match in a number or another bare value
// replaces the whole value by the string "[REDACTED]". The engine never
// decodes a document into values, so it costs one pass per pattern and
// view, and nothing when nothing matches.
package redact
