package e2e

// End-to-end tests of device enrollment (docs/ENROLLMENT.md: the flow, the
// poll interval; proto/svc/v1/enrollment.proto: DeviceTokenResponse,
// PendingEnrollment, ApproveEnrollmentRequest) over
// REST and native gRPC. Time-based rules (lifetime, hold, interval
// growth) are unit tests on a fake clock in server/enrollment_test.go.

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "svc/gen/svc/v1"
)

func init() {
	for name, spec := range map[string]rpcSpec{
		"StartEnrollment":        {http.MethodPost, "/enroll", http.StatusOK, "", unaryOn(apiv1.NewEnrollmentClient, apiv1.EnrollmentClient.StartEnrollment)},
		"PollEnrollment":         {http.MethodPost, "/enroll/poll", http.StatusOK, "", unaryOn(apiv1.NewEnrollmentClient, apiv1.EnrollmentClient.PollEnrollment)},
		"ListPendingEnrollments": {http.MethodGet, "/enroll/pending", http.StatusOK, "", unaryOn(apiv1.NewEnrollmentClient, apiv1.EnrollmentClient.ListPendingEnrollments)},
		"ApproveEnrollment":      {http.MethodPost, "/enroll/approve", http.StatusOK, "", unaryOn(apiv1.NewEnrollmentClient, apiv1.EnrollmentClient.ApproveEnrollment)},
		"RejectEnrollment":       {http.MethodPost, "/enroll/reject", http.StatusNoContent, "", unaryOn(apiv1.NewEnrollmentClient, apiv1.EnrollmentClient.RejectEnrollment)},
	} {
		rpcs[name] = spec
	}
	// The device polling codes (core.md Errors): 400, InvalidArgument.
	for _, code := range []string{"authorization_pending", "slow_down", "expired_token", "access_denied"} {
		wireStatus[code] = http.StatusBadRequest
		wireGRPC[code] = codes.InvalidArgument
	}
}

// pendingFields are the keys of a Pending enrollment (proto/svc/v1).
var pendingFields = []string{"createdAt", "expiresAt", "labelHint", "sourceIp", "status", "userAgent", "userCode"}

// mintEnrollment starts an enrollment anonymously and checks the
// DeviceAuthorizationResponse.
func mintEnrollment(t *testing.T, d driver, label string) (deviceCode, userCode string) {
	t.Helper()
	req := obj{}
	if label != "" {
		req["labelHint"] = label
	}
	b := mustCall(t, d, anonymous, "StartEnrollment", req)
	require.ElementsMatch(t, []string{"deviceCode", "userCode", "verificationUri", "verificationUriComplete", "expiresIn", "interval"}, keys(b))
	deviceCode, _ = b["deviceCode"].(string)
	userCode, _ = b["userCode"].(string)
	require.Regexp(t, `^[A-Za-z0-9_-]{43}$`, deviceCode)
	require.Regexp(t, `^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$`, userCode)
	require.Regexp(t, `^http://127\.0\.0\.1:[0-9]+/ui/enroll$`, b["verificationUri"])
	require.Equal(t, b["verificationUri"].(string)+"?code="+userCode, b["verificationUriComplete"])
	require.InDelta(t, 300, b["expiresIn"], 0)
	require.InDelta(t, 5, b["interval"], 0)
	return deviceCode, userCode
}

// Full flow to a working token, then the device code is spent.
func TestEnrollFlow(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		deviceCode, userCode := mintEnrollment(t, d, "ci laptop")

		list := listOf(t, mustCall(t, d, admin, "ListPendingEnrollments", nil), "pending")
		require.Len(t, list, 1)
		item := list[0]
		require.ElementsMatch(t, pendingFields, keys(item))
		require.Equal(t, userCode, item["userCode"])
		require.Equal(t, "ci laptop", item["labelHint"])
		require.Equal(t, "127.0.0.1", item["sourceIp"], "the TCP peer")
		require.NotEmpty(t, item["userAgent"])
		require.Equal(t, "pending", item["status"])
		require.InDelta(t, 300_000, item["expiresAt"].(float64)-item["createdAt"].(float64), 1)

		// Typed in lower case without the dash, bound to a new member.
		typed := strings.ToLower(strings.ReplaceAll(userCode, "-", ""))
		appr := mustCall(t, d, admin, "ApproveEnrollment", obj{"userCode": typed, "newMember": obj{
			"name": "device1", "role": obj{"title": "runner", "description": "ci"}, "permissions": []string{"operator"},
		}})
		require.ElementsMatch(t, []string{"member", "tokenInfo"}, keys(appr))
		member, _ := appr["member"].(obj)
		require.Equal(t, "device1", member["name"])
		info, _ := appr["tokenInfo"].(obj)
		require.Equal(t, "enroll", info["origin"])
		require.Equal(t, "ci laptop", info["label"])
		require.Equal(t, "admin", info["createdBy"])
		require.NotContains(t, keys(info), "token")

		list = listOf(t, mustCall(t, d, admin, "ListPendingEnrollments", nil), "pending")
		require.Len(t, list, 1)
		require.Equal(t, "approved", list[0]["status"])

		got := mustCall(t, d, anonymous, "PollEnrollment", obj{"deviceCode": deviceCode})
		require.ElementsMatch(t, []string{"token", "member"}, keys(got))
		require.Equal(t, "device1", got["member"])
		token, _ := got["token"].(string)
		require.Regexp(t, tokenRE, token)
		requireWorks(t, d, bearer(token), "device1")

		// The plaintext was in that one poll only.
		for _, op := range []struct {
			name string
			req  obj
		}{
			{"ListPendingEnrollments", nil},
			{"ListTokens", obj{"name": "device1"}},
			{"ListMembers", nil},
		} {
			b, err := json.Marshal(mustCall(t, d, admin, op.name, op.req))
			require.NoError(t, err)
			require.NotContains(t, string(b), token, op.name)
			require.NotContains(t, string(b), deviceCode, op.name)
		}
		b, err := json.Marshal(appr)
		require.NoError(t, err)
		require.NotContains(t, string(b), token)
		require.Empty(t, listOf(t, mustCall(t, d, admin, "ListPendingEnrollments", nil), "pending"), "the read deleted the record")

		// A reused device code is spent; so is the user code.
		mustFail(t, d, anonymous, "PollEnrollment", obj{"deviceCode": deviceCode}, "expired_token")
		mustFail(t, d, admin, "ApproveEnrollment", obj{"userCode": userCode, "member": "admin"}, "not_found")
		mustFail(t, d, anonymous, "PollEnrollment", obj{"deviceCode": strings.Repeat("A", 43)}, "expired_token")

		// Binding to an existing member adds a token to it.
		deviceCode, userCode = mintEnrollment(t, d, "")
		appr = mustCall(t, d, admin, "ApproveEnrollment", obj{"userCode": userCode, "member": "device1", "label": "second"})
		info, _ = appr["tokenInfo"].(obj)
		require.Equal(t, "second", info["label"])
		got = mustCall(t, d, anonymous, "PollEnrollment", obj{"deviceCode": deviceCode})
		second, _ := got["token"].(string)
		requireWorks(t, d, bearer(second), "device1")
		requireWorks(t, d, bearer(token), "device1")
	})
}

// Pending, then slow_down when polled before the interval.
func TestEnrollPending(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		deviceCode, _ := mintEnrollment(t, d, "")
		mustFail(t, d, anonymous, "PollEnrollment", obj{"deviceCode": deviceCode}, "authorization_pending")
		mustFail(t, d, anonymous, "PollEnrollment", obj{"deviceCode": deviceCode}, "slow_down")
	})
}

func TestEnrollReject(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		deviceCode, userCode := mintEnrollment(t, d, "")
		mustCall(t, d, admin, "RejectEnrollment", obj{"userCode": userCode, "reason": "not a team laptop"})
		mustFail(t, d, admin, "ApproveEnrollment", obj{"userCode": userCode, "member": "admin"}, "conflict")
		mustFail(t, d, admin, "RejectEnrollment", obj{"userCode": userCode}, "conflict")
		list := listOf(t, mustCall(t, d, admin, "ListPendingEnrollments", nil), "pending")
		require.Equal(t, "rejected", list[0]["status"])

		// The reason reaches the device as errorDescription.
		switch d.(type) {
		case restDriver:
			r := p.do(t, http.MethodPost, "/enroll/poll", obj{"deviceCode": deviceCode})
			require.Equal(t, http.StatusBadRequest, r.status)
			require.Equal(t, "access_denied", r.body["error"])
			require.Equal(t, "not a team laptop", r.body["errorDescription"])
			require.NotEmpty(t, r.body["message"])
		default:
			_, err := apiv1.NewEnrollmentClient(p.grpcConn(t)).PollEnrollment(context.Background(), &apiv1.PollEnrollmentRequest{DeviceCode: deviceCode})
			require.Error(t, err)
			var desc string
			for _, det := range status.Convert(err).Details() {
				if ei, ok := det.(*errdetails.ErrorInfo); ok {
					require.Equal(t, "access_denied", ei.GetReason())
					desc = ei.GetMetadata()["errorDescription"]
				}
			}
			require.Equal(t, "not a team laptop", desc)
		}
	})
}

// The 11th mint from one address within the hour is 429 with Retry-After.
func TestEnrollMintLimit(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		for range 10 {
			mintEnrollment(t, d, "")
		}
		r := mustFail(t, d, anonymous, "StartEnrollment", obj{}, "rate_limited")
		require.Greater(t, r.retryAfter, 3000, "the oldest mint leaves the hour window in about an hour")
		require.LessOrEqual(t, r.retryAfter, 3600)
		require.Len(t, listOf(t, mustCall(t, d, admin, "ListPendingEnrollments", nil), "pending"), 10, "the refusal stored nothing")
	})
}

// Mint and poll are public; the rest need members.manage.
func TestEnrollGates(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		_, userCode := mintEnrollment(t, d, "")
		plain := bearer(createMember(t, d, admin, "plain"))
		for _, tc := range []struct {
			op  string
			req obj
		}{
			{"ListPendingEnrollments", nil},
			{"ApproveEnrollment", obj{"userCode": userCode, "member": "plain"}},
			{"RejectEnrollment", obj{"userCode": userCode}},
		} {
			t.Run(tc.op, func(t *testing.T) {
				mustFail(t, d, anonymous, tc.op, tc.req, "unauthenticated")
				mustFail(t, d, plain, tc.op, tc.req, "forbidden")
				mustFail(t, d, bearer(randomToken(t)), tc.op, tc.req, "unauthenticated")
			})
		}
		list := listOf(t, mustCall(t, d, admin, "ListPendingEnrollments", nil), "pending")
		require.Equal(t, "pending", list[0]["status"], "refused calls decided nothing")
	})
}

func TestEnrollBadInput(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		_, userCode := mintEnrollment(t, d, "")
		for _, tc := range []struct {
			name string
			op   string
			c    cred
			req  obj
			code string
		}{
			{"neither member nor newMember", "ApproveEnrollment", admin, obj{"userCode": userCode}, "bad_request"},
			{"both", "ApproveEnrollment", admin, obj{"userCode": userCode, "member": "admin", "newMember": obj{"name": "x"}}, "bad_request"},
			{"unknown member", "ApproveEnrollment", admin, obj{"userCode": userCode, "member": "ghost"}, "bad_request"},
			{"new member taken", "ApproveEnrollment", admin, obj{"userCode": userCode, "newMember": obj{"name": "admin"}}, "conflict"},
			{"unknown preset", "ApproveEnrollment", admin, obj{"userCode": userCode, "newMember": obj{"name": "n1", "permissions": []string{"nope"}}}, "bad_request"},
			{"malformed user code", "ApproveEnrollment", admin, obj{"userCode": "1234-5678", "member": "admin"}, "bad_request"},
			{"unknown user code", "ApproveEnrollment", admin, obj{"userCode": "BBBB-BBBB", "member": "admin"}, "not_found"},
			{"reject unknown", "RejectEnrollment", admin, obj{"userCode": "BBBB-BBBB"}, "not_found"},
			{"reason too long", "RejectEnrollment", admin, obj{"userCode": userCode, "reason": strings.Repeat("r", 513)}, "bad_request"},
			{"poll without code", "PollEnrollment", anonymous, obj{}, "bad_request"},
			{"label hint too long", "StartEnrollment", anonymous, obj{"labelHint": strings.Repeat("l", 129)}, "bad_request"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				mustFail(t, d, tc.c, tc.op, tc.req, tc.code)
			})
		}
		list := listOf(t, mustCall(t, d, admin, "ListPendingEnrollments", nil), "pending")
		require.Len(t, list, 1)
		require.Equal(t, "pending", list[0]["status"])
		require.NotContains(t, memberNames(t, d, admin), "n1")
	})
}

// Bad JSON on the public routes and on approve is 400 over REST.
func TestEnrollBadJSON(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := p.adminToken(t)
	for _, path := range []string{"/enroll", "/enroll/poll", "/enroll/approve", "/enroll/reject"} {
		t.Run(path, func(t *testing.T) {
			r := p.do(t, http.MethodPost, path, []byte(`{"userCode":`), withBearer(admin))
			require.Equal(t, http.StatusBadRequest, r.status, "%s", r.raw)
			require.Equal(t, "bad_request", r.body["error"])
		})
	}
	r := p.do(t, http.MethodPost, "/enroll", []byte(`{"labelHint":"`+strings.Repeat("x", 5000)+`"}`))
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status, "public routes take small bodies")
}
