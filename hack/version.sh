#!/usr/bin/env bash
# Prints the version finegrain's binaries report (`nodeagent version`, internal/version): $VERSION
# when set, else the tag or commit of this tree with "-dirty" when it has changes, else "dev"
# (outside a git checkout). With --ldflags, prints the go build -ldflags argument that stamps it;
# make build and hack/images/build.sh build with it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
case "${1:-}" in
  "") echo "$version" ;;
  --ldflags) echo "-X github.com/finegrain-dev/finegrain/internal/version.version=$version" ;;
  *)
    echo "usage: hack/version.sh [--ldflags]" >&2
    exit 2
    ;;
esac
