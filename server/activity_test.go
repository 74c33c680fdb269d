package server

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/store"
	"svc/store/sqlite"
)

// TestRedactionFollowsTheSecretsAPI: what the core gives ingest redaction
// (activity.go) follows the secrets API: a value set after the redactor
// was built is redacted from the next upload on; every secret value of
// the team is redacted from every member's telemetry, bound to it or not,
// and stays redacted once unbound (an agent may have read it before); a
// deleted secret is no secret any more.
func TestRedactionFollowsTheSecretsAPI(t *testing.T) {
	act, err := sqlite.OpenActivity(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = act.Close() })
	e := newRegistryEnvWith(t, false, act)
	const first = "hunter2-Sup3r/Secret+x"
	e.createSecret(t, "deploy-key", "DEPLOY_KEY", false)
	_, err = e.secrets.SetSecretValue(e.as("admin"), &apiv1.SetSecretValueRequest{Slug: "deploy-key", Value: first})
	require.NoError(t, err)
	_, err = e.secrets.AddSecretBinding(e.as("admin"), &apiv1.AddSecretBindingRequest{Slug: "deploy-key", Member: "alice"})
	require.NoError(t, err)

	upload := func(member, text string) string {
		t.Helper()
		s, err := structpb.NewStruct(map[string]any{"text": text})
		require.NoError(t, err)
		ctx := auth.WithPrincipal(context.Background(), &auth.Principal{Member: member, Via: auth.ViaBearer})
		_, err = e.srv.act.UploadActivity(ctx, &apiv1.UploadActivityRequest{Name: member, Events: []*apiv1.ActivityEventInput{{Kind: kindToolAction, Data: s}}})
		require.NoError(t, err)
		rows, err := act.ListActivity(context.Background(), store.ActivityFilter{Member: member})
		require.NoError(t, err)
		return string(rows[0].Data) // newest first
	}
	require.Contains(t, upload("alice", "old "+first), "old [REDACTED]", "the redactor is built")

	const newValue = "rotated-Value-42"
	_, err = e.secrets.SetSecretValue(e.as("admin"), &apiv1.SetSecretValueRequest{Slug: "deploy-key", Value: newValue})
	require.NoError(t, err)
	require.Contains(t, upload("alice", "new "+newValue), "new [REDACTED]", "a value set since is redacted")

	e.createSecret(t, "later", "LATER", false)
	require.Contains(t, upload("alice", "x bound-later-Value"), "x bound-later-Value", "no value yet: kept")
	_, err = e.secrets.SetSecretValue(e.as("admin"), &apiv1.SetSecretValueRequest{Slug: "later", Value: "bound-later-Value"})
	require.NoError(t, err)
	require.Contains(t, upload("alice", "x bound-later-Value"), "x [REDACTED]", "bound to no one: redacted all the same")
	_, err = e.secrets.AddSecretBinding(e.as("admin"), &apiv1.AddSecretBindingRequest{Slug: "later", Member: "alice"})
	require.NoError(t, err)
	_, err = e.secrets.RemoveSecretBinding(e.as("admin"), &apiv1.RemoveSecretBindingRequest{Slug: "later", Name: "alice"})
	require.NoError(t, err)
	require.Contains(t, upload("alice", "y bound-later-Value"), "y [REDACTED]", "unbound since: still redacted")
	require.Contains(t, upload("bob", "z "+newValue), "z [REDACTED]", "alice's secret in bob's telemetry")

	_, err = e.secrets.DeleteSecret(e.as("admin"), &apiv1.DeleteSecretRequest{Slug: "later"})
	require.NoError(t, err)
	require.Contains(t, upload("alice", "w bound-later-Value"), "w bound-later-Value", "a deleted secret is no secret any more")
}
