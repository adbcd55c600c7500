// Package archtest enforces the import rules of ARCHITECTURE.md §2: every package of the
// module belongs to a layer and may import module packages only from strictly lower
// layers; the runtime half (tensor, target, devices*, vm, compilecache) imports nothing
// from the compiler half; only cmd/... imports configs (the server's config file: the
// libraries take typed options); and no package registers anything from init().
//
// A package that is not in the layer table fails the test: adding a package means
// deciding its layer here.
package archtest
