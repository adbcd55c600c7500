package archtest

import "strings"

// layers maps a package path (relative to the module) to its layer; docs/ARCHITECTURE.md
// ("Layers") mirrors this table.
// An entry ending in "/..." covers every package below that folder.
var layers = map[string]int{
	"tensor": 0, "target": 0, "compilecache": 0, "configs": 0, "internal/...": 0,
	"graph": 1, "loopir": 1, "devices": 1,
	"graph/passes": 2, "loopir/passes": 2, "te": 2, "loader": 2, "vm": 2,
	"devices/cpu": 2, "devices/cuda": 2, "devices/opencl": 2, "devices/devicetest": 2,
	"internal/gputest": 3, // opens the GPU devices for tests
	// measures a machine's roofline (devices/cpu) and counts a graph node group's work
	"internal/roofline": 3,
	// generated protobuf code sits below the importer that uses it
	"loader/onnx/onnxpb":      2,
	"serve/modelrepo/modelpb": -1,
	// a leaf helper (standard library only) shared by compilecache and devices/cpu
	"internal/workdir": -1,
	"schedule":         3, "codegen": 3, "intrin": 3, "loader/onnx": 3, "kernels/ref": 3,
	"kernels": 4,
	"engine":  5, "kernels/cpu": 5, "internal/kerneltest": 5, "internal/nodetest": 5, "kernels/gpu": 5,
	"compiler": 6,
	// the model repository (layout, names, config.pbtxt), read by serve and kiln prebuild
	"serve/modelrepo": 6,
	"serve":           7,
	// the tuner: compiles and measures models in child processes (compiler, engine)
	"tune":          7,
	"serve/httpapi": 8, "serve/grpcapi": 8,
	// generated gRPC code (imports serve/modelrepo/modelpb only) sits below the API that uses it
	"serve/grpcapi/inferencepb": 7, "serve/servetest": 7,
	"cmd/kiln/...": 9, "cmd/kiln": 9, "bench/...": 9,
	// CLI-only helpers sit just below the command that imports them
	"cmd/kiln/internal/...": 8,
	// helpers shared by the benchmark programs sit just below them
	"bench/internal/...": 8,
}

// configOnly packages may be imported only by the packages matching configImporters:
// the libraries take typed options, which the command fills from the config file.
var (
	configOnly      = []string{"configs", "configs/..."}
	configImporters = []string{"cmd/...", "cmd"}
)

// runtimeHalf may not import any package of compilerHalf.
var runtimeHalf = []string{"tensor", "target", "devices/...", "devices", "vm", "compilecache"}

var compilerHalf = []string{"graph/...", "graph", "loopir/...", "loopir", "te", "schedule",
	"kernels/...", "kernels", "codegen", "intrin", "tune", "compiler", "loader/...", "loader", "serve/...", "serve"}

// targetNeutral packages hold compute definitions every target shares: they import no
// ISA-specific package (isaSpecific) and query no ISA feature; what a target's schedule
// needs to know about its vector unit comes from that target's strategies (isaAware).
var (
	targetNeutral = []string{"kernels", "kernels/..."}
	isaAware      = []string{"kernels/cpu", "kernels/cpu/..."}
	isaSpecific   = []string{"intrin", "intrin/..."}
)

// layerOf returns the layer of a module-relative package path.
func layerOf(rel string) (int, bool) {
	if l, ok := layers[rel]; ok {
		return l, true
	}
	best, found, bestLen := 0, false, -1
	for pat, l := range layers {
		if prefix, ok := strings.CutSuffix(pat, "/..."); ok && strings.HasPrefix(rel, prefix+"/") && len(prefix) > bestLen {
			best, found, bestLen = l, true, len(prefix)
		}
	}
	return best, found
}

func matches(rel string, pats []string) bool {
	for _, p := range pats {
		if prefix, ok := strings.CutSuffix(p, "/..."); ok {
			if strings.HasPrefix(rel, prefix+"/") {
				return true
			}
		} else if rel == p {
			return true
		}
	}
	return false
}
