package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kilnrt/kiln/serve"
)

// Triton's system shared memory extension over REST: register, unregister and status
// for one region (/region/:name) or every region, served by the service
// (serve.Service.RegisterSystemSharedMemory...). CUDA shared memory is not implemented:
// its endpoints answer 501 saying so.

// shmRegisterBody is a register request's body.
type shmRegisterBody struct {
	Key      string `json:"key"`
	Offset   uint64 `json:"offset"`
	ByteSize uint64 `json:"byte_size"`
}

func (s *Server) shmRegister(c *gin.Context) {
	body, held, err := s.readBody(c.Request)
	if err != nil {
		fail(c, err)
		return
	}
	defer held.Release()
	var b shmRegisterBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		fail(c, fmt.Errorf("%w: system shared memory register: the body is not {\"key\": string, \"offset\": uint64, \"byte_size\": uint64}: %v", errBadBody, err))
		return
	}
	if err := s.svc.RegisterSystemSharedMemory(c.Param("region"), b.Key, b.Offset, b.ByteSize); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusOK)
}

func (s *Server) shmUnregister(c *gin.Context) {
	if err := s.svc.UnregisterSystemSharedMemory(c.Param("region")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusOK)
}

func (s *Server) shmStatus(c *gin.Context) {
	regions, err := s.svc.SystemSharedMemoryStatus(c.Param("region"))
	if err != nil {
		fail(c, err)
		return
	}
	out := []gin.H{}
	for _, r := range regions {
		out = append(out, gin.H{"name": r.Name, "key": r.Key, "offset": r.Offset, "byte_size": r.ByteSize})
	}
	c.JSON(http.StatusOK, out)
}

// noCUDASharedMemory answers every CUDA shared memory endpoint.
func (s *Server) noCUDASharedMemory(c *gin.Context) {
	c.AbortWithStatusJSON(http.StatusNotImplemented, gin.H{"error": errNoCUDASharedMemory})
}

// errNoCUDASharedMemory is the answer of the CUDA shared memory endpoints.
const errNoCUDASharedMemory = "kiln does not implement CUDA shared memory; use system shared memory (/v2/systemsharedmemory)"

// shmParams is the response parameters of an output written to shared memory.
func shmParams(ref *serve.SharedMemoryRef) gin.H {
	return gin.H{"shared_memory_region": ref.Region, "shared_memory_offset": ref.Offset, "shared_memory_byte_size": ref.ByteSize}
}
