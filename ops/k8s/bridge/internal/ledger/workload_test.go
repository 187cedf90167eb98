package ledger

import (
	"reflect"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// A pod set's topology assignment is read from the status the ledger shows, in v1beta1's shape
// {levels, domains} or v1beta2's {levels, slices}.
func TestReadTopology(t *testing.T) {
	want := &TopologyAssignment{Levels: []string{"rack", "kubernetes.io/hostname"},
		Domains: []TopologyDomain{{Values: []string{"r1", "h1"}, Count: 2}, {Values: []string{"r1", "h2"}, Count: 2}}}
	for _, ta := range []string{
		`{"levels":["rack","kubernetes.io/hostname"],"domains":[{"values":["r1","h1"],"count":2},{"values":["r1","h2"],"count":2}]}`,
		`{"levels":["rack","kubernetes.io/hostname"],"slices":[{"domainCount":2,"valuesPerLevel":[{"universal":"r1"},` +
			`{"individual":{"prefix":"h","roots":["1","2"]}}],"podCounts":{"universal":2}}]}`,
	} {
		w := &WorkloadState{PodSets: []PodSetAssignment{{Name: "main", Count: 4}, {Name: "other", Count: 1}}}
		status := `{"admission":{"clusterQueue":"cq","podSetAssignments":[{"name":"main","count":4,` +
			`"topologyAssignment":` + ta + `},{"name":"other","count":1}]}}`
		if err := utiljson.Unmarshal([]byte(status), &w.Status); err != nil {
			t.Fatal(err)
		}
		if err := readTopology(w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(w.Topology("main"), want) || w.Topology("other") != nil {
			t.Fatalf("%s: %+v", ta, w.PodSets)
		}
	}
}
