# syntax=docker/dockerfile:1
# Hearth: build the binaries (hearthd, hearthctl, hearth-sim), run hearthd
# on a small Debian base, as a non-root user.
#
#   docker build -t hearth \
#       --build-arg VERSION="$(git describe --tags --always --dirty)" \
#       --build-arg REVISION="$(git rev-parse HEAD)" .
#   docker run -d --name hearth -p 1883:1883 -p 8080:8080 \
#       -v hearth-config:/etc/hearth -v hearth-data:/var/lib/hearth hearth
#   docker exec hearth hearthctl credentials -data-dir /var/lib/hearth   # the generated accounts
#
# Safe as shipped:
#   - hearthd runs as UID:GID 10001:10001 (numeric, so that an orchestrator
#     can check "not root"); only the data directory is writable by it.
#   - Authentication is on by default: at the first start hearthd generates
#     a password for every account (bridges, automations) into
#     /var/lib/hearth/credentials.yaml (mode 0600) and the embedded broker
#     and the HTTP API admit no one without them. That is why the flags
#     below may listen on all interfaces inside the container (a container
#     cannot publish 127.0.0.1). Nothing here sets allow_anonymous.
#   - CA certificates are installed: https webhooks and mqtts:// brokers
#     verify their peers against them.
#   - HEALTHCHECK asks /readyz with "hearthctl ready" (there is no curl).
#
# /etc/hearth (the config, hearth.yaml) and /var/lib/hearth (the command
# store and the credentials) are volumes: mount your own config over the
# first, keep the second. deploy/docker-compose.yml runs this image with
# Mosquitto and Zigbee2MQTT; see deploy/README.md.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The version and revision that -version prints (scripts/build.sh stamps
# them with -ldflags -X); without the build args the script asks git, and
# failing that the binaries say "devel".
ARG VERSION=""
ARG REVISION=""
RUN VERSION="$VERSION" REVISION="$REVISION" OUT=/out/ sh scripts/build.sh

FROM debian:bookworm-slim
# ca-certificates: the system roots Go's crypto/tls reads
# (/etc/ssl/certs/ca-certificates.crt).
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
# A fixed UID and GID, so that a volume's owner is the same in every build
# and on the host (chown 10001:10001 a bind-mounted data directory).
RUN groupadd --system --gid 10001 hearth \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/hearth \
        --no-create-home --shell /usr/sbin/nologin hearth \
 && install -d -o 10001 -g 10001 -m 0700 /var/lib/hearth \
 && install -d -o root -g 10001 -m 0750 /etc/hearth
COPY --from=build /out/ /usr/local/bin/
# The config is readable by hearthd, writable only by root: it may hold
# passwords, and hearthd never writes it.
COPY --chown=root:10001 --chmod=0640 configs/hearth.yaml /etc/hearth/hearth.yaml
USER 10001:10001
VOLUME ["/etc/hearth", "/var/lib/hearth"]
EXPOSE 1883 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["hearthctl", "-addr", "http://127.0.0.1:8080", "ready", "-q", "-timeout", "4s"]
ENTRYPOINT ["hearthd"]
CMD ["-config", "/etc/hearth/hearth.yaml", "-data-dir", "/var/lib/hearth", \
     "-mqtt-listen", "0.0.0.0:1883", "-http-listen", "0.0.0.0:8080"]
