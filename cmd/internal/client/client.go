// Package client is svc's reusable client: broker URL and credential
// resolution (flag, SVC_TOKEN, token cache), the token cache file, one gRPC
// connection that sends the bearer and x-svc-protocol: 1 on every call, and
// REST helpers that decode the spec's {error, message} bodies.
//
// It is a real client: it speaks to the broker over the wire only and never
// imports the server, store or gateway packages. The CLI commands, the MCP
// toolbox and the runner build on it:
//
//	url, _ := client.ResolveURL(flagURL, os.Getenv)
//	tok, _, _ := client.ResolveToken(flagToken, os.Getenv, url)
//	c, _ := client.New(url, tok)
//	defer c.Close()
//	resp, err := c.Broker().GetBriefing(ctx, &apiv1.GetBriefingRequest{})
//	fmt.Println(client.Describe(err, url))
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	apiv1 "svc/gen/svc/v1"
)

// ProtocolVersion is the x-svc-protocol value this client speaks.
const ProtocolVersion = "1"

// maxResponseBytes bounds a REST answer the client reads.
const maxResponseBytes = 8 << 20

// Client talks to one broker with one credential. It is safe for concurrent
// use. Token may be empty for the public routes (health, enrollment).
type Client struct {
	url   string // exactly as given: the token cache key
	base  string // url without a trailing slash: REST paths are appended
	token string
	http  *http.Client
	conn  *grpc.ClientConn
}

// New returns a client of the broker at brokerURL (http or https, as
// ResolveURL accepts). No connection is made until the first call.
func New(brokerURL, token string) (*Client, error) {
	u, err := url.Parse(brokerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("broker URL %q: want http(s)://host[:port]", brokerURL)
	}
	host := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			host += ":443"
		} else {
			host += ":80"
		}
	}
	creds := insecure.NewCredentials()
	if u.Scheme == "https" {
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	c := &Client{
		url:   brokerURL,
		base:  strings.TrimSuffix(brokerURL, "/"),
		token: token,
		http:  &http.Client{Timeout: 30 * time.Second},
	}
	conn, err := grpc.NewClient(host,
		grpc.WithTransportCredentials(creds),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(c.outgoing(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(c.outgoing(ctx), desc, cc, method, opts...)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("broker URL %q: %w", brokerURL, err)
	}
	c.conn = conn
	return c, nil
}

func (c *Client) outgoing(ctx context.Context) context.Context {
	kv := []string{"x-svc-protocol", ProtocolVersion}
	if c.token != "" {
		kv = append(kv, "authorization", "Bearer "+c.token)
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// URL is the broker URL exactly as given to New: the token cache key.
func (c *Client) URL() string { return c.url }

// Conn is the shared gRPC connection; every call on it carries the bearer
// and x-svc-protocol: 1.
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Broker is the Broker service over Conn.
func (c *Client) Broker() apiv1.BrokerClient { return apiv1.NewBrokerClient(c.conn) }

// Fs is the Fs service over Conn.
func (c *Client) Fs() apiv1.FsClient { return apiv1.NewFsClient(c.conn) }

// Close releases the gRPC connection.
func (c *Client) Close() error { return c.conn.Close() }

// APIError is a REST refusal in the spec's shape: {error, message}, plus
// errorDescription on enrollment's access_denied.
type APIError struct {
	Status      int
	Code        string
	Message     string
	Description string
}

func (e *APIError) Error() string {
	msg := e.Code
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Description != "" {
		msg += " (" + e.Description + ")"
	}
	return msg
}

// ErrNotSvc is returned when the URL answers but not as an svc broker: a
// 404 or a body that is not the JSON svc sends.
var ErrNotSvc = errors.New("not an svc broker")

// Do sends one REST request: in (if not nil) as JSON, out (if not nil)
// decoded from a 2xx JSON answer. A non-2xx svc answer is an *APIError; an
// answer that is not svc's JSON wraps ErrNotSvc.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		enc, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(enc)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Svc-Protocol", ProtocolVersion)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return err
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	isJSON := ct == "application/json" && json.Valid(raw)
	if resp.StatusCode/100 == 2 {
		if !isJSON {
			return fmt.Errorf("%w: %s %s answered %d with %q", ErrNotSvc, method, path, resp.StatusCode, ct)
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%w: %s %s: %v", ErrNotSvc, method, path, err)
		}
		return nil
	}
	var e struct {
		Error            string `json:"error"`
		Message          string `json:"message"`
		ErrorDescription string `json:"errorDescription"`
	}
	if !isJSON || json.Unmarshal(raw, &e) != nil || e.Error == "" {
		return fmt.Errorf("%w: %s %s answered %d", ErrNotSvc, method, path, resp.StatusCode)
	}
	return &APIError{Status: resp.StatusCode, Code: e.Error, Message: e.Message, Description: e.ErrorDescription}
}

// Health is GET /healthz.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// Ping checks over REST that the URL is an svc broker: GET /healthz must
// answer JSON with a status. It needs no token.
func (c *Client) Ping(ctx context.Context) (Health, error) {
	var h Health
	if err := c.Do(ctx, http.MethodGet, "/healthz", nil, &h); err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			// svc answers /healthz at its root: a 404 means the URL (or its
			// path) names something else.
			return h, fmt.Errorf("%w: GET %s/healthz answered 404", ErrNotSvc, c.base)
		}
		return h, err
	}
	if h.Status == "" {
		return h, fmt.Errorf("%w: /healthz has no status", ErrNotSvc)
	}
	return h, nil
}

// maxRawBytes bounds the body DoRaw reads: a file read through fs/read can
// be larger than a JSON answer.
const maxRawBytes = 64 << 20

// RawResponse is a REST answer as it came: the status, the media type and
// the body bytes (at most 64 MiB).
type RawResponse struct {
	Status      int
	ContentType string
	Body        []byte
}

// ErrTooLarge is returned by DoRaw for an answer over its limit.
var ErrTooLarge = errors.New("answer too large")

// DoRaw sends one REST request with body (may be nil) of contentType and
// returns the answer whatever its status: refusals are the caller's to
// read (the MCP toolbox shows the broker's raw JSON body). Only a failure to
// talk to the broker, or an answer over 64 MiB, is an error.
func (c *Client) DoRaw(ctx context.Context, method, path string, body io.Reader, contentType string) (*RawResponse, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if body != nil && contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("X-Svc-Protocol", ProtocolVersion)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxRawBytes+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxRawBytes {
		return nil, fmt.Errorf("%w: %s %s is over %d bytes", ErrTooLarge, method, path, maxRawBytes)
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return &RawResponse{Status: resp.StatusCode, ContentType: ct, Body: raw}, nil
}
