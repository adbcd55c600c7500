// Package archtest enforces the import rules and is their source of truth
// (docs/ARCHITECTURE.md, "Layers", mirrors it): every package of the module belongs to a
// layer (layers.go) and may import module packages only from strictly lower layers; the
// runtime half (tensor, target, devices*, vm, compilecache) imports nothing from the
// compiler half; serving (serve, serve/httpapi, serve/grpcapi) imports neither the
// compiler, the graph passes nor a concrete device, reaching them through its Engine
// interface (forbidden, in archtest_test.go); only cmd/... imports configs (the server's
// config file: the libraries take typed options); and no package registers anything
// from init().
//
// Target-neutral packages (kernels and everything below it but kernels/cpu) know no ISA:
// they import no ISA-specific package (intrin), and their sources, tests included, name no
// ISA extension in a string literal ("avx2", "fma", "neon", ...), query no target feature
// (t.Has("…")) and read no target feature list or vector width. A target's strategies
// pass such knowledge in as parameters.
//
// A package that is not in the layer table fails the test: adding a package means
// deciding its layer here.
package archtest
