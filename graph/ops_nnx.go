package graph

func nnxOps() []OpInfo {
	return nil
}
