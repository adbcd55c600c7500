package compiler

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// The text ops run as host ops (vm/hostop_strings.go): strings have no device layout,
// so StringNormalizer, TfIdfVectorizer (on strings and on integers) and every Cast or
// CastLike to or from strings run on the host.

// stringHostRows are the host op table's rows for the text ops.
func stringHostRows() []hostRow {
	return []hostRow{
		{graph.OpStringNormalizer, hostLowering{name: vm.HostStringNormalizer}},
		{graph.OpTfIdfVectorizer, hostLowering{name: vm.HostTfIdfVectorizer}},
		{graph.OpCast, hostLowering{name: vm.HostCastString, when: castsString}},
		{graph.OpCastLike, hostLowering{name: vm.HostCastString, when: castsString}},
	}
}

// castsString reports a cast whose source or target holds strings.
func castsString(n *graph.Node, _ func(*graph.Value) *graph.Value) bool {
	in, out := n.Input(0), n.Outputs[0]
	return (in != nil && in.Type.DType == tensor.String) || out.Type.DType == tensor.String
}
