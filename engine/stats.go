package engine

// Progress reports where a compile is: a stage and, for stages with parts, how many
// of them are done.
type Progress struct {
	Stage       string // "passes", "lower", "build", "plan"
	Done, Total int
	Detail      string // the node or kernel at hand
}

// Stats describe a compiled executable, for reports and `kiln inspect`.
type Stats struct {
	Backend       string        // the backend that compiled it (compiler.Backend.Name)
	Nodes         int           // graph nodes after the passes (subgraphs included)
	Launches      int           // kernel launches in the entry function's code
	Copies        int           // copies between devices in the entry function's code
	Kernels       int           // unique kernels (after deduplication)
	Fused         int           // nodes run inside another node's kernel (epilogues)
	ArenaBytes    int64         // the static plan's arena (the peak of planned tensors)
	UnplannedSum  int64         // the planned tensors' bytes without reuse
	ConstantBytes int64         // constants carried by the executable
	KernelsCached int           // kernel objects taken from the journal instead of the C compiler
	Stages        []StageTiming // wall time per stage
	Strategies    map[string]int
	Groups        []Group // kernel launches of the entry function, in program order
	// Tensors are the tensors the kernels of the entry function's straight-line part
	// write, in program order, with where each lives; TextureBytes of their bytes are
	// in image2d textures.
	Tensors      []TensorPlace
	TextureBytes int64

	// LayoutTransforms are the LayoutTransform nodes of the entry function (alone or
	// inside a fused kernel), each run once per inference; LayoutBytes are the bytes of
	// the tensors they reorder (each read once and written once).
	LayoutTransforms int
	LayoutBytes      int64

	// ConcatsInPlace are the Concats of the entry function that launch nothing: the
	// kernels producing their inputs write into the output (compiler/concat.go).
	ConcatsInPlace int `json:",omitempty"`
}

// TensorPlace is where one kernel output lives: a buffer (Scope "global") or an
// image2d texture of Image texels ("texture", e.g. "56x1792"); Why says why a tensor a
// texture-capable backend could have put in a texture is in a buffer.
type TensorPlace struct {
	Name  string
	Bytes int64
	Scope string
	Image string `json:",omitempty"`
	Why   string `json:",omitempty"`
}

// Group is one kernel launch: the node it was built for (the anchor) and the nodes
// fused into it, with the kernel and the strategy that built it.
type Group struct {
	Kernel   string
	Strategy string
	Anchor   string   // e.g. `Conv "/layer1/conv1"`
	Fused    []string // the epilogue nodes run inside it
	Device   string   // the device it runs on ("cpu", "opencl")
	Why      string   // why it does not run on the target's device (empty when it does)
	// Workload is the kernel's structural key, which tuning records are keyed by;
	// Tuned names the record's choice the kernel was built with (empty: the default
	// schedule); Space is the kernel's search space when the compile was asked for it.
	Workload string       `json:",omitempty"`
	Tuned    string       `json:",omitempty"`
	Space    []TuneOption `json:",omitempty"`
}

// StageTiming is how long one stage took.
type StageTiming struct {
	Stage   string
	Seconds float64
}
