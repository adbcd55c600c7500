package kernels

import (
	"errors"
	"testing"
)

func TestKnobAssignmentsAreCheckedAgainstTheirDeclaration(t *testing.T) {
	decl := []Knob{{Name: "KC", Values: []int64{64, 128}, Default: 128}, {Name: "MC", Values: []int64{4, 8}, Default: 8}}
	k, err := ParseKnobs("MC=4")
	if err != nil {
		t.Fatal(err)
	}
	full, err := Resolve(decl, k)
	if err != nil || full.String() != "KC=128,MC=4" {
		t.Fatalf("Resolve(MC=4) = %v, %v; want the default KC filled in", full, err)
	}
	back, err := ParseKnobs(full.String())
	if err != nil || back.String() != full.String() {
		t.Fatalf("canonical form does not read back: %v, %v", back, err)
	}
	for _, bad := range []string{"KC=96", "NR=16", "KC=64,KC=128", "KC", "KC=x"} {
		k, err := ParseKnobs(bad)
		if err == nil {
			_, err = Resolve(decl, k)
		}
		if !errors.Is(err, ErrBadChoice) {
			t.Errorf("%q: err %v, want ErrBadChoice", bad, err)
		}
	}
}
