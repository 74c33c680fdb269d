package storetest

import (
	"testing"

	"svc/store"
)

// suiteTest is the element type of RunAll's tables.
type suiteTest = struct {
	name string
	run  func(t *testing.T, s store.Store)
}

// RunAll runs the conformance suite of store.Store, one subtest per
// behaviour. newStore must return a fresh, empty store on every call and
// close it when t ends. Each aggregate's file holds its table.
func RunAll(t *testing.T, newStore func(t *testing.T) store.Store) {
	for _, suite := range [][]suiteTest{
		memberTests, tokenTests, sessionTests, txTests,
		messageTests, channelTests, pushSubTests,
		fsTests, objectiveTests,
		enrollmentTests,
		secretTests, toolSourceTests,
		platformTests,
		hookTests,
		approvalTests,
		deliveryTests,
		loopTests,
		metaTests,
		leaseTests,
		revocationTests,
		longValueTests,
	} {
		for _, tc := range suite {
			t.Run(tc.name, func(t *testing.T) {
				tc.run(t, newStore(t))
			})
		}
	}
}
