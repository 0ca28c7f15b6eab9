# syntax=docker/dockerfile:1
# Multi-stage build: a static, trimmed binary on a distroless base, run as a
# non-root user. .ci/run checks the build command below on every commit.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/gateway ./cmd/gateway

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gateway /usr/local/bin/gateway
USER 65532:65532
# Inside a container the gateway listens on all interfaces; override with
# --listen / --admin or these variables.
ENV SESSIONGATE_LISTEN=:50051 \
    SESSIONGATE_ADMIN=:8080
EXPOSE 50051 8080
ENTRYPOINT ["/usr/local/bin/gateway"]
