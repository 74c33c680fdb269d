package hooks

import "fmt"

func fmtSscanf(s string, n *int) (int, error) { return fmt.Sscanf(s, "%d", n) }
