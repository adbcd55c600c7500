package tune

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGBDTFitsANonlinearFunctionBetterThanTheMean: on held-out points of
// y = x0² − 2·x1 + step(x2), the ensemble's error is a small fraction of the error of
// predicting the mean (what the tuner would do without a model).
func TestGBDTFitsANonlinearFunctionBetterThanTheMean(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	f := func(x []float64) float64 {
		y := x[0]*x[0] - 2*x[1]
		if x[2] > 0.3 {
			y += 1.5
		}
		return y
	}
	sample := func(n int) ([][]float64, []float64) {
		var xs [][]float64
		var ys []float64
		for i := 0; i < n; i++ {
			x := []float64{rng.Float64()*2 - 1, rng.Float64()*2 - 1, rng.Float64(), rng.Float64()}
			xs, ys = append(xs, x), append(ys, f(x))
		}
		return xs, ys
	}
	trainX, trainY := sample(200)
	testX, testY := sample(200)
	m := FitGBDT(trainX, trainY, DefaultGBDT)
	pred := make([]float64, len(testY))
	mean := make([]float64, len(testY))
	for i, x := range testX {
		pred[i], mean[i] = m.Predict(x), m.base
	}
	got, baseline := mse(pred, testY), mse(mean, testY)
	if !(got < 0.15*baseline) || math.IsNaN(got) {
		t.Fatalf("held-out MSE %.4f, the mean's %.4f: want under 15%%", got, baseline)
	}
}
