package tune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

var (
	// ErrCrashed: the measuring process died (a signal, or a non-zero exit without an
	// answer): some candidate's kernel crashed it.
	ErrCrashed = errors.New("measuring process crashed")
	// ErrHung: the measuring process ran past its timeout and was killed.
	ErrHung = errors.New("measuring process timed out")
)

// Measurer runs one measurement request.
type Measurer interface {
	Measure(ctx context.Context, req Request) (*Response, error)
}

// Child measures in a child process: Command (argv; the first element the program)
// reads the request as JSON on its standard input and writes the response as JSON on
// its standard output (ChildMain). The process is killed after Timeout.
type Child struct {
	Command []string
	Env     []string // added to this process's environment
	Timeout time.Duration
}

// Measure implements Measurer. A child that dies or hangs is ErrCrashed or ErrHung,
// with the end of what it wrote on its standard error.
func (c Child) Measure(ctx context.Context, req Request) (*Response, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, c.Command[0], c.Command[1:]...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Stdin = bytes.NewReader(in)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	tail := stderr.String()
	if len(tail) > 600 {
		tail = "…" + tail[len(tail)-600:]
	}
	tail = strings.TrimSpace(tail)
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("%w after %v", ErrHung, c.Timeout)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return nil, fmt.Errorf("%w: %v: %s", ErrCrashed, ws.Signal(), tail)
			}
		}
		return nil, fmt.Errorf("%w: %v: %s", ErrCrashed, err, tail)
	}
	var resp Response
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("%w: unreadable answer: %v", ErrCrashed, err)
	}
	if len(resp.Results) != len(req.Assignments) {
		return nil, fmt.Errorf("%w: %d results for %d assignments", ErrCrashed, len(resp.Results), len(req.Assignments))
	}
	return &resp, nil
}

// ChildMain is the measuring child: a request on r, its response on w. It returns the
// process's exit status (0: answered).
func ChildMain(ctx context.Context, r io.Reader, w io.Writer, errw io.Writer, opts MeasureOptions) int {
	var req Request
	if err := json.NewDecoder(r).Decode(&req); err != nil {
		fmt.Fprintln(errw, "tune child: request:", err)
		return 2
	}
	resp, err := Measure(ctx, req, opts)
	if err != nil {
		fmt.Fprintln(errw, "tune child:", err)
		return 1
	}
	if err := json.NewEncoder(w).Encode(resp); err != nil {
		fmt.Fprintln(errw, "tune child: response:", err)
		return 1
	}
	return 0
}
