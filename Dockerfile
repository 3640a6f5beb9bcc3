# syntax=docker/dockerfile:1

# leafd image: a static binary on Alpine, run as a non-root user.
#
#   docker build -t leafd .
#   docker run -p 8080:8080 -e LEAFD_STORE_DRIVER=mysql \
#     -e LEAFD_STORE_DSN='user:password@tcp(db:3306)/leaf?parseTime=true' leafd
#
# Configuration comes from LEAFD_* environment variables (docs/configuration.md);
# the image holds no config.yaml, so unset keys take the built-in defaults
# (no seed tags). Mount a file and pass --config to use one instead.

# The build runs on the builder's own platform and cross-compiles (pure Go,
# no cgo), so `docker buildx build --platform linux/amd64,linux/arm64` needs
# no emulation.
#
# The Go version is pinned to at least go.mod's `go` line (and `toolchain`,
# if any): the golang images set GOTOOLCHAIN=local, so an older image does
# not fetch a newer toolchain but stops the build. A floating tag such as
# golang:1.26 may be an older cached patch release. Raise this line with
# go.mod; deploy/goversion_test.go fails when it falls behind.
FROM --platform=$BUILDPLATFORM golang:1.26.8 AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags='-s -w' -o /leafd ./cmd/leafd

FROM alpine:3.22
RUN apk add --no-cache ca-certificates tzdata \
    && addgroup -S -g 10001 leafd \
    && adduser -S -D -H -u 10001 -G leafd leafd \
    && install -d -o leafd -g leafd /var/lib/leafd
COPY --from=build /leafd /usr/local/bin/leafd
# The working directory is writable: the default SQLite store,
# file:data/leafd.db, lives under it. Mount a volume here to keep it.
WORKDIR /var/lib/leafd
# By number, not name: Kubernetes' runAsNonRoot can only verify a numeric
# user (uid 10001 is the leafd user created above).
USER 10001:10001
ENV LEAFD_HTTP_ADDR=0.0.0.0:8080 \
    LEAFD_LOG_FORMAT=json
EXPOSE 8080
# /healthz answers 200 while the process serves (busybox wget; the port
# follows LEAFD_HTTP_ADDR's default above).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD wget -q -O /dev/null http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["/usr/local/bin/leafd"]
CMD ["serve"]
