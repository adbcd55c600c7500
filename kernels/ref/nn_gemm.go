package ref

// A plain, parallel matrix-product kernel shared by Conv, Gemm and MatMul: rows of the
// output are split across goroutines; each row accumulates a[i,k]*b[k,:] with the inner
// loop over a contiguous row of b (so the compiler can vectorize it).

import (
	"runtime"
	"sync"
)

type float interface{ float32 | float64 }

// gemm computes c[m×n] (+)= a[m×k] · b[k×n], all row-major with the given row strides.
// If accumulate is false, c is overwritten.
func gemm[T float](m, n, k int, a []T, lda int, b []T, ldb int, c []T, ldc int, accumulate bool) {
	parallelRows(m, n*k, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := c[i*ldc : i*ldc+n]
			if !accumulate {
				clear(row)
			}
			for p := 0; p < k; p++ {
				av := a[i*lda+p]
				if av == 0 {
					continue
				}
				br := b[p*ldb : p*ldb+n]
				for j := range row {
					row[j] += av * br[j]
				}
			}
		}
	})
}

// parallelRows splits [0, rows) across up to GOMAXPROCS goroutines when the work
// (rows × workPerRow multiply-adds) is large enough to pay for them.
func parallelRows(rows, workPerRow int, f func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if workers <= 1 || rows < 2 || rows*workPerRow < 1<<16 {
		f(0, rows)
		return
	}
	workers = min(workers, rows)
	var wg sync.WaitGroup
	chunk := (rows + workers - 1) / workers
	for lo := 0; lo < rows; lo += chunk {
		hi := min(lo+chunk, rows)
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}
