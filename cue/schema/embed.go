// Package schema embeds the CUE schema of a router configuration. The schema is the single
// source of truth for field names, types, closedness and defaults; the compiler unifies
// user files with it and `router schema` prints it.
package schema

import _ "embed"

// Source is the schema text. Its definitions are #Config (a whole file) and the types
// it is built from.
//
//go:embed router.cue
var Source []byte

// Filename is the stable name the schema carries in error positions, so that a message
// pointing into the schema reads as such rather than as a path on the build machine.
const Filename = "schema/router.cue"
