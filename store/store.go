package store

import "context"

// Tx is the set of operations available inside one transaction.
type Tx interface {
	MemberStore
	TokenStore
	SessionStore
	MessageStore
	ChannelStore
	PushSubscriptionStore
	ObjectiveStore
	FsStore
	EnrollmentStore
	SecretStore
	ToolSourceStore
	PlatformStore
	HookStore
	ApprovalStore
	DeliveryStore
	LoopStore
	MetaStore
	LeaseStore
	RevocationStore
	LimitStore
	// Savepoint runs fn inside a savepoint of the transaction: when fn
	// returns an error, what it wrote is rolled back and the transaction
	// goes on.
	Savepoint(ctx context.Context, fn func() error) error
}

// Store is the main store.
type Store interface {
	Tx
	// WithTx runs fn in one write transaction, committing when fn returns nil
	// and rolling back otherwise. fn must use only tx.
	WithTx(ctx context.Context, fn func(tx Tx) error) error
	Close() error
}
