package server

import (
	"context"

	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
)

// Broker implements apiv1.BrokerServer. The service is large, so its RPCs
// are split into parts, one struct per part in a file of its own, each over
// the shared core (and its own state: the TOTP limiter, the web push
// notifier); Broker only composes them. New RPCs of other capabilities go to
// services of their own, not here.
type Broker struct {
	brokerBase
	*brokerInfo     // broker.go: health, briefing
	*brokerMembers  // members.go: members and tokens
	*brokerSessions // sessions.go: TOTP, sessions
	*brokerMessages // messages.go: push, history, subscribe
	*brokerChannels // channels.go
	*brokerPresence // presence.go: roster, live activity
	*brokerWebPush  // webpush.go: VAPID key, push subscriptions
	*brokerDelivery // delivery.go: runners' delivery states
}

// brokerBase carries the generated forward-compatibility base one level
// down, so every part's method wins over its "unimplemented" stub.
type brokerBase struct {
	apiv1.UnimplementedBrokerServer
}

var _ apiv1.BrokerServer = (*Broker)(nil)

func newBroker(c *core, push *pushNotifier) *Broker {
	return &Broker{
		brokerInfo:     &brokerInfo{core: c},
		brokerMembers:  &brokerMembers{core: c},
		brokerSessions: newBrokerSessions(c),
		brokerMessages: &brokerMessages{core: c},
		brokerChannels: &brokerChannels{core: c},
		brokerPresence: &brokerPresence{core: c},
		brokerWebPush:  &brokerWebPush{core: c, push: push},
		brokerDelivery: &brokerDelivery{core: c},
	}
}

// brokerInfo serves what describes the broker and the caller's place in the
// team.
type brokerInfo struct{ *core }

// Health implements apiv1.BrokerServer: always an answer while the
// process is up; status "degraded", with the problems, while a store is
// failing (health.go).
func (b *brokerInfo) Health(context.Context, *apiv1.HealthRequest) (*apiv1.HealthResponse, error) {
	resp := &apiv1.HealthResponse{Status: healthOK, Version: b.version}
	if problems := b.storageProblems(); len(problems) > 0 {
		resp.Status = healthDegraded
		resp.Problems = &structpb.ListValue{}
		for _, p := range problems {
			resp.Problems.Values = append(resp.Problems.Values, structpb.NewStringValue(p))
		}
	}
	return resp, nil
}

// GetBriefing implements apiv1.BrokerServer.
func (b *brokerInfo) GetBriefing(ctx context.Context, _ *apiv1.GetBriefingRequest) (*apiv1.GetBriefingResponse, error) {
	p := mustPrincipal(ctx)
	me, ok := b.team.Member(p.Member)
	if !ok {
		return nil, auth.ErrUnauthenticated
	}
	team, presets := b.team.Info()
	pt := &apiv1.Team{Name: team.Name, Directive: team.Directive, Context: team.Context, PermissionPresets: map[string]*structpb.ListValue{}}
	for name, leaves := range presets {
		lv := &structpb.ListValue{}
		for _, l := range leaves {
			lv.Values = append(lv.Values, structpb.NewStringValue(l))
		}
		pt.PermissionPresets[name] = lv
	}
	open, err := b.openObjectives(ctx, me.Name)
	if err != nil {
		return nil, err
	}
	resp := &apiv1.GetBriefingResponse{
		Member:         memberToProto(me, true),
		Team:           pt,
		OpenObjectives: open,
	}
	for _, m := range b.team.Members() {
		resp.Teammates = append(resp.Teammates, teammateToProto(m))
	}
	if resp.ExternalNotifications, err = b.hooks.Briefing(ctx, me.Name); err != nil {
		return nil, err
	}
	return resp, nil
}
