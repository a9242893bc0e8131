#!/bin/sh
# Builds Hearth's three binaries (hearthd, hearthctl, hearth-sim) into
# $OUT (default bin/), stamped with the version and VCS revision that
# their -version prints. POSIX sh; no make needed.
#
#   scripts/build.sh                      # version from git describe
#   VERSION=v1.2.0 REVISION=abc123 OUT=/out/ scripts/build.sh
#
# VERSION defaults to `git describe --tags --always --dirty`, REVISION to
# `git rev-parse HEAD`; outside a Git checkout they are "devel" and "" (the
# binaries then fall back to the revision Go recorded, if any). Other
# go build flags come from the environment (GOFLAGS, GOOS, GOARCH,
# CGO_ENABLED, default 0: static binaries).
set -eu

cd "$(dirname "$0")/.."

if [ -z "${VERSION:-}" ]; then
	VERSION=$(git describe --tags --always --dirty 2>/dev/null) || VERSION=devel
fi
if [ -z "${REVISION:-}" ]; then
	REVISION=$(git rev-parse HEAD 2>/dev/null) || REVISION=
fi
OUT=${OUT:-bin/}
case "$OUT" in
*/) ;;
*) OUT="$OUT/" ;;
esac
CGO_ENABLED=${CGO_ENABLED:-0}
export CGO_ENABLED

go build -trimpath \
	-ldflags "-s -w -X main.version=$VERSION -X main.revision=$REVISION" \
	-o "$OUT" ./cmd/hearthd ./cmd/hearthctl ./cmd/hearth-sim
echo "built hearthd, hearthctl and hearth-sim $VERSION (revision ${REVISION:-unknown}) into $OUT"
