# Hearth: build the binaries (hearthd, hearthctl, hearth-sim), run hearthd
# on a small Debian base.
#
#   docker build -t hearth .
#   docker run --rm -p 1883:1883 -p 8080:8080 -v hearth-data:/var/lib/hearth hearth
#
# The entrypoint's -mqtt-listen and -http-listen flags listen on all
# interfaces inside the container (the sample config binds to 127.0.0.1,
# which a container cannot publish).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/...

FROM debian:bookworm-slim
RUN useradd --system --home /var/lib/hearth --create-home hearth
COPY --from=build /out/ /usr/local/bin/
COPY configs/hearth.yaml /etc/hearth/hearth.yaml
USER hearth
VOLUME /var/lib/hearth
EXPOSE 1883 8080
ENTRYPOINT ["hearthd", "-config", "/etc/hearth/hearth.yaml", "-data-dir", "/var/lib/hearth", \
            "-mqtt-listen", "0.0.0.0:1883", "-http-listen", "0.0.0.0:8080"]
