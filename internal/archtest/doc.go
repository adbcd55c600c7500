// Package archtest enforces the import rules and is their source of truth
// (docs/ARCHITECTURE.md, "Layers", mirrors it): every package of the module belongs to a
// layer and may import module packages only from strictly lower
// layers; the runtime half (tensor, target, devices*, vm, compilecache) imports nothing
// from the compiler half; only cmd/... imports configs (the server's config file: the
// libraries take typed options); and no package registers anything from init().
//
// A package that is not in the layer table fails the test: adding a package means
// deciding its layer here.
package archtest
