// Package openapi embeds the OpenAPI document generated from proto/.
// Only this file is written by hand; svc.swagger.json comes from buf generate.
package openapi

import _ "embed"

// JSON is the generated OpenAPI (Swagger 2.0) document of the REST facade.
//
//go:embed svc.swagger.json
var JSON []byte
