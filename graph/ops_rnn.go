package graph

func rnnOps() []OpInfo {
	return nil
}
