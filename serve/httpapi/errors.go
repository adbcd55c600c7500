package httpapi

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/kilnrt/kiln/serve"
)

// statusOf maps the service's error classes to HTTP status codes as Triton does
// (invalid argument 400, not found 404, unavailable 503, internal 500), and the
// body's own failures (413 too large, 408 not read in time, 503 no budget to hold it).
func statusOf(err error) int {
	switch {
	case errors.Is(err, serve.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, serve.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, serve.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, serve.ErrDisabled):
		return http.StatusForbidden
	case errors.Is(err, serve.ErrDeadline):
		return http.StatusGatewayTimeout
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errBadBody):
		return http.StatusBadRequest
	case errors.Is(err, errBodyTimeout):
		return http.StatusRequestTimeout
	case errors.Is(err, errBusy):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// fail answers {"error": "..."} with the status of err.
func fail(c *gin.Context, err error) {
	c.AbortWithStatusJSON(statusOf(err), gin.H{"error": err.Error()})
}

var (
	errTooLarge    = errors.New("request too large")
	errBadBody     = errors.New("malformed request")
	errBodyTimeout = errors.New("request body timed out")
	errBusy        = errors.New("the server's memory for request bodies is taken; retry later")
)
