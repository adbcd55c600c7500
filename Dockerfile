# syntax=docker/dockerfile:1
#
# kiln in a container: docker build --build-arg VERSION=$(git describe --always --dirty) -t kiln .
#   docker run --rm -p 8000:8000 -p 8001:8001 -p 8002:8002 -v kiln-journal:/var/cache/kiln kiln
# serves the bundled examples; mount a Triton-style repository and pass
# "serve --model-repository /models" (or "serve --config /etc/kiln/kiln.yaml") for yours.

# --- build: one static binary (the native libraries are dlopened at run time, no cgo)
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/kiln ./cmd/kiln

# --- runtime: the CPU JIT runs the C compiler at run time, so gcc and libc6-dev stay
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev ca-certificates \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --gid 10001 kiln \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin kiln \
 && mkdir -p /var/cache/kiln \
 && chown 10001:10001 /var/cache/kiln
COPY --from=build /out/kiln /usr/local/bin/kiln
COPY examples/models /opt/kiln/models
# The binary journal (mount a volume here to keep compiled models across restarts and
# share them between replicas); logs as JSON lines for log collectors.
ENV KILN_CACHE_DIR=/var/cache/kiln \
    KILN_LOG_FORMAT=json
# numeric, so that Kubernetes' runAsNonRoot can verify it
USER 10001:10001
# REST (Open Inference Protocol), gRPC, Prometheus /metrics
EXPOSE 8000 8001 8002
ENTRYPOINT ["kiln"]
CMD ["serve", "--model-repository", "/opt/kiln/models"]
