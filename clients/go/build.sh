#!/usr/bin/env bash
# Builds the Go client: generates package dschedv1 from protos/ with protoc, protoc-gen-go and
# protoc-gen-go-grpc, then compiles the example, in GOPATH mode against Debian's Go packages (no
# module proxy). Output (not committed): clients/go/build/ (gopath/ with the generated package, bin/).
#
#   clients/go/build.sh            check the toolchain, generate, build bin/example
#   clients/go/build.sh --install  first apt-get install what is missing (as root)
#
# The import path of the generated package is the protos' go_package:
# github.com/dsched/dsched/clients/go/dschedv1.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$here/build"
pkg=github.com/dsched/dsched/clients/go
gocode=/usr/share/gocode/src

# Debian package -> a file it installs. golang-github-golang-protobuf-1-5-dev: genproto's errdetails
# is built on github.com/golang/protobuf, and the older 1.3 package panics at init
# ("protobuf tag not enough fields").
declare -A probe=(
  [golang-go]=/usr/bin/go
  [protobuf-compiler]=/usr/bin/protoc
  [protoc-gen-go]=/usr/bin/protoc-gen-go
  [protoc-gen-go-grpc]=/usr/bin/protoc-gen-go-grpc
  [golang-google-grpc-dev]=$gocode/google.golang.org/grpc/server.go
  [golang-google-protobuf-dev]=$gocode/google.golang.org/protobuf/proto/encode.go
  [golang-google-genproto-dev]=$gocode/google.golang.org/genproto/googleapis/rpc/errdetails
  [golang-github-golang-protobuf-1-5-dev]=$gocode/github.com/golang/protobuf/ptypes/any.go
)
missing=()
for p in "${!probe[@]}"; do [ -e "${probe[$p]}" ] || missing+=("$p"); done
if ((${#missing[@]})); then
  if [ "${1:-}" != --install ]; then
    echo "clients/go/build.sh: missing Debian packages; run: apt-get install ${missing[*]}" >&2
    echo "  (or clients/go/build.sh --install as root)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

rm -rf "$out/gopath/src/$pkg"
mkdir -p "$out/gopath/src/$pkg" "$out/bin"
protoc -I "$repo/protos" -I /usr/include \
  --go_out="$out/gopath/src" --go-grpc_out="$out/gopath/src" \
  "$repo"/protos/dsched/v1/*.proto
ln -s "$here/example" "$out/gopath/src/$pkg/example"

export GO111MODULE=off GOFLAGS= GOPATH="$out/gopath:/usr/share/gocode"
# The build cache stays in the user's cache directory (not build/) so fresh clones, as in CI, reuse it.
[ -n "${GOCACHE:-}${XDG_CACHE_HOME:-}${HOME:-}" ] || export GOCACHE="$out/cache"
go vet "$pkg/example"
go build -o "$out/bin/example" "$pkg/example"
echo "clients/go/build.sh: built $out/bin/example"
