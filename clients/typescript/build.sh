#!/usr/bin/env bash
# Builds the TypeScript (Node) client: generates the wire code from protos/ with Debian's protoc and
# protoc-gen-es (src/gen/), then compiles it and the example with tsc (dist/). Neither is committed.
#
#   clients/typescript/build.sh            check the toolchain, npm ci if needed, generate, compile
#   clients/typescript/build.sh --install  first apt-get install protoc if missing (as root)
#   clients/typescript/build.sh --deps     only npm ci if needed (CI does it before the tests)
#
# Versions are pinned in package.json and package-lock.json. The google.rpc error details
# (ErrorInfo, BadRequest) are generated from the copy of error_details.proto that the project's
# Python dependency googleapis-common-protos ships, so `make setup` must have run (PY overrides
# the interpreter that has it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$here"

node_major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
if ((node_major < 20)); then
  echo "clients/typescript/build.sh: Node.js 20 or newer is required (found ${node_major})" >&2
  exit 1
fi

# npm ci only when the lock file changed since the last install (npm ci always reinstalls).
lock_sum="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ "$(cat node_modules/.dsched-lock 2>/dev/null)" != "$lock_sum" ]; then
  npm ci --no-audit --no-fund --loglevel=error
  echo "$lock_sum" >node_modules/.dsched-lock
fi
[ "${1:-}" != --deps ] || exit 0

if ! command -v protoc >/dev/null; then
  if [ "${1:-}" != --install ]; then
    echo "clients/typescript/build.sh: protoc is missing; run: apt-get install protobuf-compiler" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends protobuf-compiler >/dev/null
fi
py="${PY:-$repo/.venv/bin/python}"
googleapis="$("$py" -c 'import google.rpc, pathlib; print(pathlib.Path(list(google.rpc.__path__)[0]).parents[1])' 2>/dev/null)" || {
  echo "clients/typescript/build.sh: no googleapis-common-protos in $py; run make setup first" >&2
  exit 1
}

rm -rf src/gen dist
mkdir -p src/gen
protoc -I "$repo/protos" -I "$googleapis" -I /usr/include \
  --plugin=protoc-gen-es="$here/node_modules/.bin/protoc-gen-es" \
  --es_out=src/gen --es_opt=target=ts,import_extension=js \
  "$repo"/protos/dsched/v1/*.proto google/rpc/error_details.proto
node_modules/.bin/tsc -p .
echo "clients/typescript/build.sh: built $here/dist/example.js"
