#!/usr/bin/env bash
# Run this package's 1.x test suites (in-memory, HTTP, crash-resume) against other versions of
# @modelcontextprotocol/sdk. The suites that also need the 2.x SDK or third-party clients run
# with the versions installed in the workspace only.
# Usage (from packages/mcp, after `pnpm build` of core, store-sqlite and testing):
#   scripts/sdk-versions.sh [version ...]        default: the lowest supported and a few after it
# Each version is installed with npm into a scratch directory (zod 3 below 1.23, zod 4 from it).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/../.." && pwd)
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(1.12.0 1.17.0 1.20.0 1.23.0)
status=0
for version in "${versions[@]}"; do
  dir=$(mktemp -d "${TMPDIR:-/tmp}/mcp-sdk-$version-XXXX")
  minor=$(echo "$version" | cut -d. -f2)
  zod=4.1.8
  [ "$minor" -lt 23 ] && zod=3.25.76
  echo '{"name":"mcp-sdk-compat","private":true,"type":"module"}' > "$dir/package.json"
  (cd "$dir" && npm install --no-audit --no-fund --silent "@modelcontextprotocol/sdk@$version" "zod@$zod")
  mkdir -p "$dir/node_modules/@idempotent-tools"
  for package in core store-sqlite testing; do
    ln -s "$root/packages/$package" "$dir/node_modules/@idempotent-tools/$package"
  done
  ln -s "$root/node_modules/vitest" "$dir/node_modules/vitest"
  ln -s "$here/node_modules/tsx" "$dir/node_modules/tsx"
  cp -r "$here/src" "$dir/src"
  echo "== @modelcontextprotocol/sdk@$version (zod $zod)"
  if ! (cd "$dir" && "$root/node_modules/.bin/vitest" run src/idempotent-server.test.ts src/http.test.ts src/crash.test.ts); then status=1; fi
  rm -rf "$dir"
done
exit $status
