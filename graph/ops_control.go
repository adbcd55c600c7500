package graph

func controlOps() []OpInfo {
	return nil
}
