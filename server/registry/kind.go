// Package registry is the kit the slug registries (tool sources, secrets,
// notification endpoints and profiles) are built on: their Kind, the
// change events that report who changed an entry to whom, one transaction
// per change on the message committer, sealing write-only values under the
// KEK, and the slug grammar. It is a shared package (docs/ARCHITECTURE.md):
// it imports engines, store and gen, never the server root or a
// capability.
package registry

import "svc/server/auth"

// Kind describes one registry: what its entries are called, where their
// events go, who manages it and how its write-only value is sealed. Code
// that must tell the registries apart reads their Kind, never compares
// kind strings.
type Kind struct {
	// Name is the data.kind of its events ("tool_source").
	Name string
	// Noun names an entry in messages and errors ("tool source").
	Noun string
	// Prefix is the thread prefix of an entry's events: Prefix:<slug>.
	Prefix string
	// Manage is the permission leaf of its managers.
	Manage string
	// Purpose prefixes the slug in the purpose its write-only value is
	// sealed for, so a value sealed for one entry never opens as another's.
	Purpose string
	// Secret names its write-only value ("credential"): the events of
	// setting and clearing it are <Secret>_set and <Secret>_deleted.
	Secret string
}

// The registries.
var (
	ToolSources = Kind{
		Name: "tool_source", Noun: "tool source", Prefix: "tool", Manage: auth.ToolsManage,
		Purpose: "svc/tool-credential/", Secret: "credential",
	}
	Secrets = Kind{
		Name: "secret", Noun: "secret", Prefix: "secret", Manage: auth.SecretsManage,
		Purpose: "svc/secret/", Secret: "value",
	}
	NotificationEndpoints = Kind{
		Name: "notification_endpoint", Noun: "notification endpoint", Prefix: "hook", Manage: auth.NotificationsManage,
		Purpose: "svc/hook/endpoint/", Secret: "secret",
	}
	// NotificationProfiles are the shared verification settings of
	// endpoints; their events go to the managers alone (docs/HOOKS.md).
	NotificationProfiles = Kind{
		Name: "notification_profile", Noun: "notification profile", Prefix: "hook-profile", Manage: auth.NotificationsManage,
		Purpose: "svc/hook/profile/", Secret: "secret",
	}
)

// Kinds are the registries whose entries have event threads.
var Kinds = []Kind{ToolSources, Secrets, NotificationEndpoints, NotificationProfiles}

// KindOfThread is the registry whose events go to threads of prefix.
func KindOfThread(prefix string) (Kind, bool) {
	for _, k := range Kinds {
		if k.Prefix == prefix {
			return k, true
		}
	}
	return Kind{}, false
}

// Thread is the thread an entry's events go to: <Prefix>:<slug>.
func (k Kind) Thread(slug string) string { return k.Prefix + ":" + slug }

// PurposeOf is the purpose an entry's write-only value is sealed for.
func (k Kind) PurposeOf(slug string) string { return k.Purpose + slug }

// SecretSet and SecretDeleted are the events of setting and clearing an
// entry's write-only value.
func (k Kind) SecretSet() string     { return k.Secret + "_set" }
func (k Kind) SecretDeleted() string { return k.Secret + "_deleted" }
