package tune

import (
	"math"
	"slices"
)

// GBDT is a gradient-boosted ensemble of regression trees for squared loss: the mean
// of the targets, plus Rate times each tree's prediction of what the trees before it
// left unexplained. Small and exact (every threshold between two distinct feature
// values is tried): it is trained on the tens to hundreds of measurements of one
// tuning run, online, after each round.
type GBDT struct {
	base  float64
	rate  float64
	trees []*treeNode
}

// GBDTConfig sizes an ensemble.
type GBDTConfig struct {
	Trees    int     // boosting rounds
	Depth    int     // of each tree
	MinLeaf  int     // fewest samples in a leaf
	Rate     float64 // shrinkage
	MinGain  float64 // least reduction of squared error worth a split
	Features int     // features per sample (all samples have this many)
}

// DefaultGBDT suits the tuner's few hundred samples.
var DefaultGBDT = GBDTConfig{Trees: 60, Depth: 3, MinLeaf: 2, Rate: 0.15}

type treeNode struct {
	feature     int // -1: a leaf
	threshold   float64
	value       float64
	left, right *treeNode
}

func (n *treeNode) predict(x []float64) float64 {
	for n.feature >= 0 {
		if x[n.feature] <= n.threshold {
			n = n.left
		} else {
			n = n.right
		}
	}
	return n.value
}

// FitGBDT fits an ensemble to samples x (rows) and targets y. With no samples it
// predicts 0.
func FitGBDT(x [][]float64, y []float64, cfg GBDTConfig) *GBDT {
	m := &GBDT{rate: cfg.Rate}
	if len(y) == 0 {
		return m
	}
	for _, v := range y {
		m.base += v
	}
	m.base /= float64(len(y))
	res := make([]float64, len(y))
	for i, v := range y {
		res[i] = v - m.base
	}
	idx := make([]int, len(y))
	for i := range idx {
		idx[i] = i
	}
	for t := 0; t < cfg.Trees; t++ {
		tree := fitTree(x, res, idx, cfg, cfg.Depth)
		for i := range res {
			res[i] -= cfg.Rate * tree.predict(x[i])
		}
		m.trees = append(m.trees, tree)
	}
	return m
}

// Predict is the ensemble's estimate for x.
func (m *GBDT) Predict(x []float64) float64 {
	p := m.base
	for _, t := range m.trees {
		p += m.rate * t.predict(x)
	}
	return p
}

// fitTree grows a regression tree on the samples idx, splitting where the sum of
// squared errors drops most.
func fitTree(x [][]float64, y []float64, idx []int, cfg GBDTConfig, depth int) *treeNode {
	mean := 0.0
	for _, i := range idx {
		mean += y[i]
	}
	mean /= float64(len(idx))
	leaf := &treeNode{feature: -1, value: mean}
	if depth == 0 || len(idx) < 2*max(cfg.MinLeaf, 1) {
		return leaf
	}
	best, bestF, bestT := cfg.MinGain, -1, 0.0
	var total, totalSq float64
	for _, i := range idx {
		total += y[i]
		totalSq += y[i] * y[i]
	}
	parentSSE := totalSq - total*total/float64(len(idx))
	order := slices.Clone(idx)
	for f := range x[idx[0]] {
		slices.SortFunc(order, func(a, b int) int { return cmpFloat(x[a][f], x[b][f]) })
		var ls, lsq float64
		for k := 0; k < len(order)-1; k++ {
			v := y[order[k]]
			ls, lsq = ls+v, lsq+v*v
			nl, nr := float64(k+1), float64(len(order)-k-1)
			if k+1 < cfg.MinLeaf || len(order)-k-1 < cfg.MinLeaf || x[order[k]][f] == x[order[k+1]][f] {
				continue
			}
			rs, rsq := total-ls, totalSq-lsq
			sse := (lsq - ls*ls/nl) + (rsq - rs*rs/nr)
			if gain := parentSSE - sse; gain > best+1e-12 {
				best, bestF, bestT = gain, f, (x[order[k]][f]+x[order[k+1]][f])/2
			}
		}
	}
	if bestF < 0 {
		return leaf
	}
	var l, r []int
	for _, i := range idx {
		if x[i][bestF] <= bestT {
			l = append(l, i)
		} else {
			r = append(r, i)
		}
	}
	return &treeNode{feature: bestF, threshold: bestT, left: fitTree(x, y, l, cfg, depth-1), right: fitTree(x, y, r, cfg, depth-1)}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// mse is the mean squared error of predictions p against y.
func mse(p, y []float64) float64 {
	s := 0.0
	for i := range y {
		s += (p[i] - y[i]) * (p[i] - y[i])
	}
	return s / math.Max(float64(len(y)), 1)
}
