package cpu

import "github.com/kilnrt/kiln/graph"
import "github.com/kilnrt/kiln/kernels"

// rnnStrategies: recurrent layers (LSTM, GRU, RNN), whose time loop is sequential.
func rnnStrategies() map[graph.Op][]kernels.Strategy {
	return map[graph.Op][]kernels.Strategy{}
}
