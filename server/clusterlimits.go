package server

import (
	"svc/server/auth"
)

// sharedLimitsKept is how long a limit hit stays in the shared store: the
// longest window that counts one.
var sharedLimitsKept = max(auth.TOTPWindow, auth.EnrollMintWindow)
