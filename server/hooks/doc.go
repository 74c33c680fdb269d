// Package hooks is the engine behind inbound notification hooks: it
// verifies a delivery's signature over its raw bytes, evaluates an
// endpoint's drop rules, renders a delivery's content from a template or
// the pretty-printed payload, and writes the service-authored frame that
// fences that untrusted content in a delivered message. It knows nothing
// of the store, the services or the transport: the notifications service
// and the ingress pipeline hand it configs, secrets, headers and bytes.
// docs/HOOKS-PROVIDERS.md has a recipe per provider and the caps.
package hooks
