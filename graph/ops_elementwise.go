package graph

func elementwiseOps() []OpInfo {
	return nil
}
