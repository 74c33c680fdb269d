package relay

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// brokerStub records what reaches the broker.
type brokerStub struct {
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func (b *brokerStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.reqs = append(b.reqs, r.Clone(r.Context()))
	b.body = append(b.body, body)
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("accepted"))
}

func (b *brokerStub) got() ([]*http.Request, [][]byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*http.Request(nil), b.reqs...), append([][]byte(nil), b.body...)
}

func startRelay(t *testing.T, brokerPath string) (*OTLP, *brokerStub, *bytes.Buffer) {
	t.Helper()
	stub := &brokerStub{}
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	var log bytes.Buffer
	r, err := StartOTLP(OTLPOptions{Broker: srv.URL + brokerPath, Token: testToken, Log: &log})
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r, stub, &log
}

func TestOTLPRelayForwardsWithTheBearer(t *testing.T) {
	for _, base := range []string{"", "/svc/"} {
		t.Run("base="+base, func(t *testing.T) {
			r, stub, _ := startRelay(t, base)
			require.True(t, strings.HasPrefix(r.Endpoint(), "http://127.0.0.1:"), r.Endpoint())
			require.NotContains(t, r.Endpoint()+r.Headers(), testToken)
			k, v, ok := strings.Cut(r.Headers(), "=")
			require.True(t, ok)
			require.Equal(t, OTLPKeyHeader, k)

			for _, path := range []string{"/v1/logs", "/v1/metrics"} {
				req, err := http.NewRequest(http.MethodPost, r.Endpoint()+path+"?q=1", strings.NewReader("payload"+path))
				require.NoError(t, err)
				req.Header.Set(OTLPKeyHeader, v)
				req.Header.Set("Content-Type", "application/x-protobuf")
				req.Header.Set("Content-Encoding", "gzip")
				req.Header.Set("Authorization", "Bearer svc_SomeoneElsesToken0123456789")
				req.Header.Set("Cookie", "svc_session=x")
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.Equal(t, http.StatusOK, resp.StatusCode)
				require.Equal(t, "accepted", string(body), "the broker's answer goes back as it is")
			}
			reqs, bodies := stub.got()
			require.Len(t, reqs, 2)
			for i, path := range []string{"/v1/logs", "/v1/metrics"} {
				q := reqs[i]
				require.Equal(t, strings.TrimSuffix(base, "/")+"/otlp"+path, q.URL.Path)
				require.Empty(t, q.URL.RawQuery)
				require.Equal(t, "Bearer "+testToken, q.Header.Get("Authorization"), "the member's bearer, not the agent's")
				require.Empty(t, q.Header.Get(OTLPKeyHeader), "the key stays on this machine")
				require.Empty(t, q.Header.Get("Cookie"))
				require.Equal(t, "gzip", q.Header.Get("Content-Encoding"), "the exporter's encoding passes through")
				require.Equal(t, "application/x-protobuf", q.Header.Get("Content-Type"))
				require.Equal(t, "payload"+path, string(bodies[i]))
			}
		})
	}
}

func TestOTLPRelayRefuses(t *testing.T) {
	r, stub, _ := startRelay(t, "")
	_, key, _ := strings.Cut(r.Headers(), "=")
	host := strings.TrimPrefix(strings.TrimSuffix(r.Endpoint(), "/otlp"), "http://")
	for _, tc := range []struct {
		name   string
		method string
		path   string
		key    string
		host   string
		want   int
	}{
		{"no key", http.MethodPost, "/otlp/v1/logs", "", "", http.StatusUnauthorized},
		{"wrong key", http.MethodPost, "/otlp/v1/logs", strings.Repeat("0", len(key)), "", http.StatusUnauthorized},
		{"key prefix", http.MethodPost, "/otlp/v1/logs", key[:len(key)-1], "", http.StatusUnauthorized},
		{"the bearer as key", http.MethodPost, "/otlp/v1/logs", testToken, "", http.StatusUnauthorized},
		{"another host", http.MethodPost, "/otlp/v1/logs", key, "evil.example:80", http.StatusMisdirectedRequest},
		{"localhost by name", http.MethodPost, "/otlp/v1/logs", key, strings.Replace(host, "127.0.0.1", "localhost", 1), http.StatusMisdirectedRequest},
		{"GET", http.MethodGet, "/otlp/v1/logs", key, "", http.StatusNotFound},
		{"other broker route", http.MethodPost, "/push", key, "", http.StatusNotFound},
		{"traversal", http.MethodPost, "/otlp/v1/logs/../../push", key, "", http.StatusNotFound},
		{"members", http.MethodPost, "/members/x/activity", key, "", http.StatusNotFound},
		{"traces", http.MethodPost, "/otlp/v1/traces", key, "", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", host)
			require.NoError(t, err)
			defer c.Close()
			h := tc.host
			if h == "" {
				h = host
			}
			raw := tc.method + " " + tc.path + " HTTP/1.1\r\nHost: " + h + "\r\nContent-Length: 2\r\nConnection: close\r\n"
			if tc.key != "" {
				raw += OTLPKeyHeader + ": " + tc.key + "\r\n"
			}
			raw += "\r\n{}"
			_, err = c.Write([]byte(raw))
			require.NoError(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			require.Equal(t, tc.want, resp.StatusCode, "%s", body)
			require.Contains(t, string(body), `"error"`)
			require.NotContains(t, string(body), testToken)
		})
	}
	reqs, _ := stub.got()
	require.Empty(t, reqs, "nothing refused reaches the broker")
}

func TestOTLPRelayBrokerDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	var log bytes.Buffer
	r, err := StartOTLP(OTLPOptions{Broker: "http://" + addr, Token: testToken, Log: &log})
	require.NoError(t, err)
	defer r.Close()
	for range 3 {
		req, _ := http.NewRequest(http.MethodPost, r.Endpoint()+"/v1/logs", strings.NewReader("x"))
		req.Header.Set(OTLPKeyHeader, r.Key())
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusBadGateway, resp.StatusCode)
		require.NotContains(t, string(body), testToken)
	}
	require.Equal(t, 1, strings.Count(log.String(), "\n"), "one line, not one per export: %s", log.String())
	require.NotContains(t, log.String(), testToken)
}

func TestStartOTLPRefusesBadSettings(t *testing.T) {
	for _, o := range []OTLPOptions{
		{Broker: "ftp://h", Token: testToken},
		{Broker: "http://user:pw@h", Token: testToken},
		{Broker: "/relative", Token: testToken},
		{Broker: "http://h"},
	} {
		_, err := StartOTLP(o)
		require.Error(t, err, "%+v", o)
	}
}
