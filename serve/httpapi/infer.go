package httpapi

import (
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
	"unsafe"

	"github.com/gin-gonic/gin"

	"github.com/kilnrt/kiln/internal/membudget"
	"github.com/kilnrt/kiln/serve"
)

// binaryAlign is where a body's binary part starts in its buffer: a cache line, the
// alignment the VM needs to read an input in place (vm.DataAlign).
const binaryAlign = 64

// headerLength is the binary data extension's header: the JSON part's length, the
// binary tensor data follows it.
const headerLength = "Inference-Header-Content-Length"

type jsonInput struct {
	Name       string          `json:"name"`
	Shape      []int64         `json:"shape"`
	Datatype   string          `json:"datatype"`
	Parameters map[string]any  `json:"parameters"`
	Data       json.RawMessage `json:"data"`
}

type jsonOutputReq struct {
	Name       string         `json:"name"`
	Parameters map[string]any `json:"parameters"`
}

// jsonResponse is an inference response's JSON (its fields in the order of their
// names, as encoding/json writes a map's).
type jsonResponse struct {
	ID      string       `json:"id,omitempty"`
	Model   string       `json:"model_name"`
	Version string       `json:"model_version"`
	Outputs []jsonOutput `json:"outputs"`
}

type jsonOutput struct {
	Data       json.RawMessage `json:"data,omitempty"`
	Datatype   string          `json:"datatype"`
	Name       string          `json:"name"`
	Parameters any             `json:"parameters,omitempty"`
	Shape      []int64         `json:"shape"`
}

// binaryDataSize is the parameters of an output sent as binary data.
type binaryDataSize struct {
	Size int `json:"binary_data_size"`
}

type jsonRequest struct {
	ID         string          `json:"id"`
	Parameters map[string]any  `json:"parameters"`
	Inputs     []jsonInput     `json:"inputs"`
	Outputs    []jsonOutputReq `json:"outputs"`
}

// readBody returns the request body, decompressed per Content-Encoding, refusing more
// than the limit after decompression, with its reservation of Options.Budget (to
// release when the request is done with the body): the declared Content-Length of a
// plain body, else the limit until the body is read, then its size. The wait for the
// budget ends with the body's read deadline (503). A body not read by its deadline
// is errBodyTimeout (408).
func (s *Server) readBody(r *http.Request) ([]byte, *membudget.Reservation, error) {
	b, held, _, err := s.readBodyPooled(r, false)
	return b, held, err
}

// readBodyPooled is readBody that, with pooled, reads a large body into a buffer of
// s.bodies and returns that buffer (nil when the body is not in one) for the caller to
// give back (s.bodies.put) once nothing uses the body's bytes.
func (s *Server) readBodyPooled(r *http.Request, pooled bool) ([]byte, *membudget.Reservation, []byte, error) {
	var body io.Reader = r.Body
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		z, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, nil, nil, bodyError("gzip body", err)
		}
		body = z
	case "deflate":
		z, err := zlib.NewReader(r.Body)
		if err != nil {
			return nil, nil, nil, bodyError("deflate body", err)
		}
		body = z
	default:
		return nil, nil, nil, fmt.Errorf("%w: unsupported Content-Encoding %q (gzip, deflate)", errBadBody, enc)
	}
	want := s.opts.MaxRequestBytes
	if n := r.ContentLength; n >= 0 && n <= want && body == r.Body {
		want = n
	}
	ctx := r.Context()
	if at := bodyDeadline(r); !at.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, at)
		defer cancel()
	}
	held, err := s.opts.Budget.Reserve(ctx, want)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %v", errBusy, err)
	}
	// a declared length sizes the buffer once (no regrowing copies of large tensors)
	var buf, base []byte
	if n := r.ContentLength; n > 0 && n <= s.opts.MaxRequestBytes && body == r.Body {
		// placed so that the binary part (after the JSON header) starts on a cache
		// line: its tensors then use the body's memory without a copy, and the VM reads
		// a large one in place as a kernel argument
		pad := 0
		if h, err := strconv.ParseInt(r.Header.Get(headerLength), 10, 64); err == nil && h >= 0 {
			pad = int((binaryAlign - h%binaryAlign) % binaryAlign)
		}
		if pooled {
			base, pooled = s.bodies.get(pad + int(n) + 1)
		}
		if !pooled {
			base = make([]byte, 0, int64(pad)+n+1)
		}
		buf = base[:pad][pad:]
		if !pooled {
			base = nil
		}
	}
	b, err := readAll(io.LimitReader(body, s.opts.MaxRequestBytes+1), buf)
	if err == nil && body != r.Body {
		// past the compressed stream's end: read the body to its end, so that its
		// read deadline is cleared
		_, err = io.Copy(io.Discard, io.LimitReader(r.Body, 64<<10))
	}
	if err != nil {
		held.Release()
		return nil, nil, nil, bodyError("reading the body", err)
	}
	if int64(len(b)) > s.opts.MaxRequestBytes {
		held.Release()
		return nil, nil, nil, fmt.Errorf("%w: the body exceeds %d bytes", errTooLarge, s.opts.MaxRequestBytes)
	}
	if base != nil && cap(b) > 0 && &b[:cap(b)][cap(b)-1] != &base[:cap(base)][cap(base)-1] {
		base = nil // the body outgrew the buffer (more than its declared length): not the pool's
	}
	held.Shrink(int64(len(b)))
	return b, held, base, nil
}

// bodyError is a failure to read or decompress the body: errBodyTimeout past its
// read deadline, else errBadBody.
func bodyError(what string, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %s: the body did not arrive within the read timeout", errBodyTimeout, what)
	}
	return fmt.Errorf("%w: %s: %v", errBadBody, what, err)
}

// readAll is io.ReadAll into buf's capacity first.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	if buf == nil {
		return io.ReadAll(r)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// decodeRequest reads and parses an inference request. The reservation returned holds the body's bytes of Options.Budget (the inputs may
// alias the body), to release when the response is written; it is nil on error.
//
// The body is read into a pooled buffer when large (bodypool.go), returned as base
// (nil otherwise): the caller gives it back once the inference succeeded and its
// response is written.
func (s *Server) decodeRequest(c *gin.Context) (*serve.InferRequest, bool, *membudget.Reservation, []byte, error) {
	body, held, base, err := s.readBodyPooled(c.Request, true)
	if err != nil {
		return nil, false, nil, nil, err
	}
	req, allBinary, err := s.parseRequest(c, body)
	if err != nil {
		held.Release()
		if base != nil {
			s.bodies.put(base) // no tensor was handed on
		}
		return nil, false, nil, nil, err
	}
	return req, allBinary, held, base, nil
}

// parseRequest parses the body of a JSON (optionally binary-extended) inference
// request.
func (s *Server) parseRequest(c *gin.Context, body []byte) (*serve.InferRequest, bool, error) {
	head, bin := body, []byte(nil)
	if h := c.GetHeader(headerLength); h != "" {
		n, err := strconv.ParseInt(h, 10, 64)
		if err != nil || n < 0 {
			return nil, false, fmt.Errorf("%w: %s: %q is not a byte count (a non-negative decimal integer)", serve.ErrInvalid, headerLength, h)
		}
		if n > int64(len(body)) {
			return nil, false, fmt.Errorf("%w: %s: %d is more than the %d-byte body", serve.ErrInvalid, headerLength, n, len(body))
		}
		head, bin = body[:n], body[n:]
		if len(bin) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(bin)))%8 != 0 {
			// tensors alias the binary part when it is aligned: align it by one copy
			bin = append(make([]byte, 0, len(bin)), bin...)
		}
	}
	jr, err := decodeHeader(head)
	if err != nil {
		return nil, false, err
	}
	req := &serve.InferRequest{Model: c.Param("model"), Version: c.Param("version"), ID: jr.ID, Params: jr.Parameters}
	for _, in := range jr.Inputs {
		if in.Name == "" {
			return nil, false, fmt.Errorf("%w: an input without a name", serve.ErrInvalid)
		}
		t := serve.Tensor{Name: in.Name, Datatype: in.Datatype, Shape: in.Shape}
		var err error
		if t.SharedMemory, err = serve.SharedMemoryOf("input "+strconv.Quote(in.Name), in.Parameters); err != nil {
			return nil, false, err
		}
		_, binSize := in.Parameters["binary_data_size"]
		switch {
		case t.SharedMemory != nil:
			if len(in.Data) > 0 || binSize {
				return nil, false, fmt.Errorf("%w: input %q has both data and shared_memory_region", serve.ErrInvalid, in.Name)
			}
		case binSize:
			size := in.Parameters["binary_data_size"]
			n, ok := size.(float64)
			if !ok || n < 0 || n != float64(int64(n)) {
				return nil, false, fmt.Errorf("%w: input %q: binary_data_size %v is not a byte count", serve.ErrInvalid, in.Name, size)
			}
			if int64(n) > int64(len(bin)) {
				return nil, false, fmt.Errorf("%w: input %q: binary_data_size %d, only %d binary bytes left in the body", serve.ErrInvalid, in.Name, int64(n), len(bin))
			}
			if len(in.Data) > 0 {
				return nil, false, fmt.Errorf("%w: input %q has both data and binary_data_size", serve.ErrInvalid, in.Name)
			}
			t.Data, err = serve.WrapRaw(in.Name, in.Datatype, in.Shape, bin[:int64(n)])
			bin = bin[int64(n):]
		default:
			if len(in.Data) == 0 {
				return nil, false, fmt.Errorf("%w: input %q has no data (and no binary_data_size)", serve.ErrInvalid, in.Name)
			}
			t.Data, err = decodeJSONData(in.Name, in.Datatype, in.Shape, in.Data)
		}
		if err != nil {
			return nil, false, err
		}
		req.Inputs = append(req.Inputs, t)
	}
	if len(bin) != 0 {
		return nil, false, fmt.Errorf("%w: %d bytes of binary data that no input claims", serve.ErrInvalid, len(bin))
	}
	allBinary := paramTrue(jr.Parameters, "binary_data_output")
	for _, o := range jr.Outputs {
		ref, err := serve.SharedMemoryOf("output "+strconv.Quote(o.Name), o.Parameters)
		if err != nil {
			return nil, false, err
		}
		req.Outputs = append(req.Outputs, serve.RequestedOutput{Name: o.Name, Params: o.Parameters, SharedMemory: ref})
	}
	return req, allBinary, nil
}

func paramTrue(p map[string]any, key string) bool {
	v, ok := p[key].(bool)
	return ok && v
}

func (s *Server) infer(c *gin.Context) {
	req, allBinary, held, base, err := s.decodeRequest(c)
	if err != nil {
		s.extendWrite(c)
		fail(c, err)
		return
	}
	defer held.Release()
	resp, err := s.svc.Infer(c.Request.Context(), req)
	s.extendWrite(c) // the response's write time starts now, however long the inference took
	if err != nil {
		fail(c, err) // the body's buffer is left to the GC: a queued step may still read it
		return
	}
	if base != nil {
		defer s.bodies.put(base) // after the response, which may alias the inputs, is written
	}
	c.Set(deviceKey, resp.Device) // for the request's log line
	if resp.CompileWait > 0 {
		c.Header(serve.CompileWaitHeader, serve.CompileWaitMillis(resp.CompileWait))
	}
	c.Header(serverTimingHeader, serverTiming(resp.ComputeTime()))
	binary := map[string]bool{}
	for _, o := range req.Outputs {
		if v, ok := o.Params["binary_data"].(bool); ok {
			binary[o.Name] = v
		} else {
			binary[o.Name] = allBinary
		}
	}
	var blobs [][]byte
	body := jsonResponse{ID: resp.ID, Model: resp.Model, Version: resp.Version, Outputs: make([]jsonOutput, 0, len(resp.Outputs))}
	for _, o := range resp.Outputs {
		e := jsonOutput{Name: o.Name, Datatype: o.Datatype, Shape: o.Shape}
		isBin, named := binary[o.Name]
		if !named {
			isBin = allBinary
		}
		switch {
		case o.SharedMemory != nil: // written to the region: no data here
			e.Parameters = shmParams(o.SharedMemory)
		case isBin:
			raw, err := serve.EncodeRaw(o.Data)
			if err != nil {
				fail(c, err)
				return
			}
			e.Parameters = binaryDataSize{len(raw)}
			blobs = append(blobs, raw)
		default:
			data, err := encodeJSONData(o.Data)
			if err != nil {
				fail(c, fmt.Errorf("%w: output %q: %v (ask for it as binary data)", serve.ErrInternal, o.Name, err))
				return
			}
			e.Data = json.RawMessage(data)
		}
		body.Outputs = append(body.Outputs, e)
	}
	head, err := json.Marshal(&body)
	if err != nil {
		fail(c, fmt.Errorf("%w: encoding the response: %v", serve.ErrInternal, err))
		return
	}
	if len(blobs) == 0 {
		c.Data(http.StatusOK, "application/json", head)
		return
	}
	// the JSON header, then each binary output as it is (no concatenated copy), all
	// in one TCP send
	h := c.Writer.Header()
	h.Set(headerLength, strconv.Itoa(len(head)))
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(head)+totalLen(blobs)))
	corked(c.Request, c.Writer, func() {
		c.Status(http.StatusOK)
		if _, err := c.Writer.Write(head); err != nil {
			return // the client went away; net/http closes the connection
		}
		for _, b := range blobs {
			if _, err := c.Writer.Write(b); err != nil {
				return
			}
		}
	})
}

// serverTimingHeader is the W3C Server-Timing response header: an inference response
// carries its execution time as the metric "infer", in milliseconds, so a client can
// tell the model's time from the network's and the server's.
const serverTimingHeader = "Server-Timing"

func serverTiming(compute time.Duration) string {
	return "infer;dur=" + strconv.FormatFloat(float64(compute.Nanoseconds())/1e6, 'f', 3, 64)
}

func totalLen(bs [][]byte) int {
	n := 0
	for _, b := range bs {
		n += len(b)
	}
	return n
}
