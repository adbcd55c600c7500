package graph

func reduceOps() []OpInfo {
	return nil
}
